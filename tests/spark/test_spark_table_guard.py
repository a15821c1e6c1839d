"""The guard on Delta and Iceberg tables: stage in the table's format, diff in the cluster, one commit.

One sequence per table format, on the session's real cluster, with a backfill run's context and a
fresh SQLite history store: a breach commits nothing, a corrective backfill v1 -> v2 is one commit,
a replay diffs against the version the window's first write committed (production has moved on to
v2 by then, and the replay still reproduces v1 exactly), and a reconcile updates only the changed
rows in one MERGE. Every expected figure comes from the scenario's formula (`day_truth`,
`expensive`, `amount`) or from SQL written here (`checksum_at`), never from the code under test.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent.guard import GuardRefusal, killswitch
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.spark.guard import stage_prefix
from tests.spark.payouts_spark import all_days, amount, checksum_at, day_truth
from tests.spark.test_spark_delta import create_delta_payouts
from tests.spark.test_spark_guard import staging_tables
from tests.spark.test_spark_iceberg import create_iceberg_payouts, snapshots
from tests.test_guard_operator import CORRECTIVE, backfill, expensive, guarded, scheduled

pytestmark = pytest.mark.spark

DAYS = [date(2026, 8, d) for d in (10, 11)]


def commits(spark: Any, table: str, fmt: str) -> list[int]:
    """The table's commits, oldest first: Delta versions or Iceberg snapshot ids (SQL written here)."""
    if fmt == "iceberg":
        return [int(s["snapshot_id"]) for s in snapshots(spark, table)]
    rows = spark.sql(f"DESCRIBE HISTORY {table}").collect()
    return sorted(int(r["version"]) for r in rows)


def merged_last(spark: Any, table: str, fmt: str) -> bool:
    """Was the table's last commit a MERGE (Delta's operation; Iceberg's merge-into summary)?"""
    if fmt == "iceberg":
        return any(k.startswith("spark.merge-into") for k in snapshots(spark, table)[-1]["summary"])
    return str(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["operation"]) == "MERGE"


def stagings(spark: Any, table: str) -> list[str]:
    if table.count(".") == 2:  # an Iceberg table: its staging lives in its catalog and namespace
        namespace = table.rsplit(".", 1)[0]
        rows = spark.sql(f"SHOW TABLES IN {namespace}").collect()
        return [r["tableName"] for r in rows if r["tableName"].startswith("_idem_stg_")]
    return staging_tables(spark)


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_guard_on_a_table_format_breach_corrective_replay_reconcile(
    spark, spark_cluster, spark_conn, history: HistoryStore, fmt: str
) -> None:
    if fmt == "delta":
        table = "payouts_tguard"
        create_delta_payouts(spark, table)
    else:
        table = create_iceberg_payouts(spark, "payouts_tguard")
    target = f"{spark_conn}:{table}"

    def op(policy: str = "v1", strategy: str = "overwrite") -> Any:
        return guarded(strategy, conn_id=spark_conn, table=table, policy=policy)

    for n, day in enumerate(DAYS):
        op().execute(scheduled(day, n))
    v1 = {d: day_truth(d, "v1") for d in DAYS}
    assert all_days(spark, table) == v1
    first = [w for w in history.writes(target=target) if w["status"] == "written"]
    before = commits(spark, table, fmt)
    writes_v1 = before[-2:]  # Delta's version 0 is the CREATE; Iceberg's CREATE makes no snapshot
    assert [w["message"] for w in first] == [f"table version {v}" for v in writes_v1]

    # a breach: refused with its diff recorded, no commit, no staging left, the kill switch tripped
    day = DAYS[0]
    changed = expensive(day)
    conf = {**CORRECTIVE, "thresholds": {"max_changed_rows": len(changed) - 1}}
    with pytest.raises(GuardRefusal, match=r"max_changed_rows") as err:
        op("v2").execute(backfill(day, 20, **conf))
    assert "Nothing was committed" in str(err.value)
    assert commits(spark, table, fmt) == before and all_days(spark, table) == v1
    assert not stagings(spark, table)
    refused = [w for w in history.writes(target=target) if w["status"] == "refused"]
    assert len(refused) == 1 and json.loads(refused[0]["diff"])["changed"] == len(changed)
    assert killswitch.clear_switch(history, "backfill", "guarded_overwrite") is True

    # stagings SIGKILLed guarded writes left, of this window and of another one: the corrective
    # drops this window's (it holds the window's lock, so no live attempt owns it), not the other's
    home = table.rsplit(".", 1)[0] + "." if fmt == "iceberg" else ""
    dead, elsewhere = (f"{stage_prefix(table, label)}dead0001" for label in (str(day), "2026-08-12"))
    for name in (dead, elsewhere):
        spark.sql(f"CREATE TABLE {home}{name} USING {fmt} AS SELECT 1 AS sale_id")
    assert sorted(stagings(spark, table)) == sorted([dead, elsewhere])

    # corrective v1 -> v2 of the first day: one commit, the diff in figures from the formula
    out = op("v2").execute(backfill(day, 21, **CORRECTIVE))
    after = commits(spark, table, fmt)
    assert after[:-1] == before and len(after) == len(before) + 1
    assert all_days(spark, table) == {day: day_truth(day, "v2"), DAYS[1]: day_truth(DAYS[1], "v1")}
    assert (out["diff"]["changed"], out["diff"]["added"], out["diff"]["removed"]) == (len(changed), 0, 0)
    delta = sum((amount(i, "v2") - amount(i, "v1") for i in changed), Decimal("0"))
    assert Decimal(str(out["diff"]["measures"]["amount_eur"]["delta"])) == delta
    end = day + timedelta(days=1)
    assert out["checksum"] == checksum_at(spark, table, after[-1], day, end)
    written = [w for w in history.writes(target=target) if w["status"] == "written"]
    assert f"table version {after[-1]}" in written[-1]["message"]
    assert stagings(spark, table) == [elsewhere]
    spark.sql(f"DROP TABLE {home}{elsewhere}" + (" PURGE" if fmt == "iceberg" else ""))

    # replay of the first day: diffed against the version its first write committed (v1), while
    # production holds v2: nothing changed against that version, checksum reproduced, no commit
    replay = {"semantics": "replay", "reason": "audit"}
    out = op().execute(backfill(day, 22, **replay))
    assert out["replay_matches"] is True
    assert out["checksum"] == checksum_at(spark, table, writes_v1[0], day, end) == first[0]["checksum"]
    assert (out["diff"]["changed"], out["diff"]["added"], out["diff"]["removed"]) == (0, 0, 0)
    assert out["diff"]["unchanged"] == day_truth(day, "v1")[0]
    assert commits(spark, table, fmt) == after
    assert all_days(spark, table)[day] == day_truth(day, "v2")

    # reconcile v1 -> v2 of the second day: one MERGE that updates only the changed rows
    other = DAYS[1]
    out = op("v2").execute(backfill(other, 23, semantics="reconcile", reason="fix", policy_version="v2"))
    final = commits(spark, table, fmt)
    assert final[:-1] == after and len(final) == len(after) + 1
    assert merged_last(spark, table, fmt)
    assert (out["rows_updated"], out["rows_inserted"], out["rows_deleted"]) == (len(expensive(other)), 0, 0)
    assert all_days(spark, table) == {d: day_truth(d, "v2") for d in DAYS}
    assert not stagings(spark, table)
    if fmt == "iceberg":  # no staging's files stay behind (an Iceberg table's stay on a plain DROP;
        # PURGE deletes every file and leaves a local disk's empty directories)
        staged = (Path(spark_cluster.base_dir) / "iceberg").glob("*/_idem_stg_*/**/*")
        assert not [f for f in staged if f.is_file()]


def test_guard_on_a_months_partitioned_iceberg_table_refuses_a_day_before_staging(
    spark, spark_conn, history: HistoryStore
) -> None:
    """A guarded corrective backfill of one day of a PARTITIONED BY (months(sale_date)) Iceberg
    table is refused before anything is staged (one overwrite by filter cannot replace a day of a
    month's files), naming the partitioning: no snapshot, no staging table left."""
    table = create_iceberg_payouts(spark, "payouts_tguard_months", partitioned_by="months(sale_date)")
    spark.sql(f"INSERT INTO {table} VALUES (900001, 9.99, 0.60, DATE'2026-08-10')")
    before = commits(spark, table, "iceberg")
    days = all_days(spark, table)
    op = guarded("overwrite", conn_id=spark_conn, table=table, policy="v2")
    with pytest.raises(Exception, match=r"months\(sale_date\)") as err:
        op.execute(backfill(DAYS[0], 30, **CORRECTIVE))
    assert "2026-08-10" in str(err.value) and "granularity='month'" in str(err.value), str(err.value)
    assert commits(spark, table, "iceberg") == before and all_days(spark, table) == days
    assert not stagings(spark, table)

"""The guard on Spark: stage -> diff in the cluster -> switch, with the thresholds and the kill switch.

The operators run inside a DAG that declares the guard, with a backfill run's context, on the
session's real cluster; the history store is a fresh SQLite file per test. Figures come from the
scenario's formula (payouts_spark.day_truth, amount).
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from airflow_idempotent.guard import GuardRefusal, killswitch
from airflow_idempotent.history import HistoryStore
from tests.spark.payouts_spark import all_days, amount, create_payouts, day_truth
from tests.test_guard_operator import CORRECTIVE, backfill, expensive, guarded, scheduled

pytestmark = pytest.mark.spark

DAYS = [date(2026, 8, d) for d in (17, 18, 19)]


def on_spark(conn_id: str, table: str, **kwargs: Any) -> Any:
    return guarded(conn_id=conn_id, table=table, **kwargs)


def test_guard_on_spark_breach_kill_switch_then_corrective_v1_to_v2(
    spark, spark_conn, history: HistoryStore
) -> None:
    """One table through the guard's whole path (one sequence, to keep the cluster time short)."""
    table = "payouts_guarded"
    target = f"{spark_conn}:{table}"
    create_payouts(spark, table)
    for n, day in enumerate(DAYS):
        on_spark(spark_conn, table).execute(scheduled(day, n))
    v1 = {d: day_truth(d, "v1") for d in DAYS}
    assert all_days(spark, table) == v1
    partitions = spark.sql(f"SHOW PARTITIONS {table}").collect()

    # a breach: refused with its diff recorded, nothing switched, the backfill kill switch tripped
    limit = len(expensive(DAYS[0])) - 1
    conf = {**CORRECTIVE, "thresholds": {"max_changed_rows": limit}}
    with pytest.raises(GuardRefusal, match=r"max_changed_rows") as err:
        on_spark(spark_conn, table, policy="v2").execute(backfill(DAYS[0], 20, **conf))
    assert "Nothing was switched" in str(err.value)
    assert all_days(spark, table) == v1
    assert spark.sql(f"SHOW PARTITIONS {table}").collect() == partitions
    assert not staging_tables(spark)
    refused = [w for w in history.writes(target=target) if w["status"] == "refused"]
    assert len(refused) == 1 and "max_changed_rows" in refused[0]["message"]
    assert json.loads(refused[0]["diff"])["changed"] == len(expensive(DAYS[0]))
    with pytest.raises(killswitch.KillSwitchTripped, match="backfill guarded_overwrite"):
        on_spark(spark_conn, table, policy="v2").execute(backfill(DAYS[1], 21, **CORRECTIVE))
    assert killswitch.clear_switch(history, "backfill", "guarded_overwrite") is True

    # reconcile needs DELETE/UPDATE: refused before anything runs, naming corrective
    with pytest.raises(GuardRefusal, match="semantics='corrective'"):
        on_spark(spark_conn, table, policy="v2").execute(
            backfill(DAYS[0], 22, semantics="reconcile", reason="fix")
        )

    # the kill switch tripped while the window is staged: the check before the switch refuses
    operator = on_spark(spark_conn, table, policy="v2")
    real = operator.check_kill_switch

    def trip_then_check(
        history_: Any, dag_id: str, backfill_: bool, fail_closed: bool, when: str, **rest: Any
    ) -> None:
        if when == "before commit":
            killswitch.set_switch(history, "global", None, "incident: stop everything")
        real(history_, dag_id, backfill_, fail_closed, when, **rest)

    operator.check_kill_switch = trip_then_check  # type: ignore[method-assign]
    with pytest.raises(killswitch.KillSwitchTripped, match="incident: stop everything"):
        operator.execute(backfill(DAYS[0], 23, **CORRECTIVE))
    assert all_days(spark, table) == v1
    assert not staging_tables(spark)
    with pytest.raises(killswitch.KillSwitchTripped):  # every write, scheduled ones too
        on_spark(spark_conn, table).execute(scheduled(DAYS[1], 24))
    assert killswitch.clear_switch(history, "global", None) is True

    # the corrective backfill v1 -> v2 of the three days, diffed in the cluster
    outs = [
        on_spark(spark_conn, table, policy="v2").execute(backfill(day, 30 + n, **CORRECTIVE))
        for n, day in enumerate(DAYS)
    ]
    assert all_days(spark, table) == {d: day_truth(d, "v2") for d in DAYS}
    for day, out in zip(DAYS, outs, strict=True):
        changed = expensive(day)
        assert (out["diff"]["changed"], out["diff"]["added"], out["diff"]["removed"]) == (len(changed), 0, 0)
        assert out["diff"]["unchanged"] == 2000 - len(changed)
        delta = sum((amount(i, "v2") - amount(i, "v1") for i in changed), Decimal("0"))
        assert Decimal(str(out["diff"]["measures"]["amount_eur"]["delta"])) == delta
        assert (out["rows_deleted"], out["rows_inserted"], out["row_count"]) == (2000, 2000, 2000)
    writes = [w for w in history.writes(target=target) if w["status"] == "written"]
    assert [(w["semantics"], w["policy_version"]) for w in writes] == [(None, "v1")] * 3 + [
        ("corrective", "v2")
    ] * 3
    assert [json.loads(w["diff"])["changed"] for w in writes[3:]] == [len(expensive(d)) for d in DAYS]


def staging_tables(spark: Any) -> list[str]:
    return [t.name for t in spark.catalog.listTables() if t.name.startswith("_idem_stg_")]

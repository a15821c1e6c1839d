"""Human approval of a breached window (on_breach="approve") on Delta and Iceberg tables.

On the session's real cluster, with a backfill run's context and a fresh SQLite history store, as
tests/test_approval.py drives it on the SQL warehouses (no scheduler: the HITL request goes to a
recording stand-in of the supervisor channel, and the task is resumed by calling
`approval_complete` with the event Airflow's HITL detail produces). A corrective v2 backfill of a
day breaks max_changed_rows: its staged rows are kept in a table of the target's format and the
task parks; an approval commits exactly them in one new table version; an approval after the
table moved on is refused naming both versions; a newer attempt supersedes a pending one, a
rejection writes nothing; either drops the kept table. Expected figures come from plain Spark SQL
over the sales table written here (v2 pays 0.55 instead of 0.60 on prices from 400.00) and the
scenario's formula (`day_truth`, `expensive`), never from the code under test.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskAwaitingInput
from airflow.sdk.execution_time import task_runner

from airflow_idempotent.guard import GuardRefusal
from airflow_idempotent.guard.approval import StaleApproval
from airflow_idempotent.history import HistoryStore, approvals
from airflow_idempotent.identity import AttemptIdentity
from airflow_idempotent.spark.adapter import SparkAdapter
from airflow_idempotent.spark.guard import stage_prefix, sweep_stages
from tests.spark.payouts_spark import all_days, create_payouts, day_truth
from tests.spark.test_spark_delta import create_delta_payouts
from tests.spark.test_spark_iceberg import create_iceberg_payouts
from tests.spark.test_spark_table_guard import commits
from tests.test_approval import APPROVE_GUARD, TI, Supervisor, response
from tests.test_guard_operator import CORRECTIVE, backfill, expensive, guarded, scheduled

pytestmark = pytest.mark.spark

DAY = date(2026, 8, 19)
PREFIXES = ("_idem_apr_", "_idem_stg_")


@pytest.fixture
def supervisor(monkeypatch: pytest.MonkeyPatch) -> Supervisor:
    channel = Supervisor()
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", channel, raising=False)
    return channel


def make_table(spark: Any, fmt: str, name: str) -> str:
    if fmt == "iceberg":
        return create_iceberg_payouts(spark, name)
    create_delta_payouts(spark, name)
    return name


def kept_tables(spark: Any, table: str) -> list[str]:
    """The kept and staging tables beside `table` (its catalog and namespace), by SHOW TABLES."""
    where = f" IN {table.rsplit('.', 1)[0]}" if table.count(".") == 2 else ""
    rows = spark.sql(f"SHOW TABLES{where}").collect()
    return sorted(r["tableName"] for r in rows if r["tableName"].startswith(PREFIXES))


def v2_change(spark: Any, table: str, day: date) -> tuple[int, Decimal]:
    """The rows v2 changes in `day` and the change of their total, by plain Spark SQL over the
    sales and the table as written (v1): prices from 400.00 paid at 0.55 instead of 0.60."""
    spark.sql(f"REFRESH TABLE {table}")
    row = spark.sql(
        "SELECT count(*) AS n, sum(CAST(round(s.price_eur * 0.55, 2) AS DECIMAL(12,2)) - t.amount_eur) AS d "
        f"FROM sales s JOIN {table} t ON s.sale_id = t.sale_id "
        f"WHERE s.sale_date = DATE'{day}' AND s.price_eur >= 400"
    ).collect()[0]
    return int(row["n"]), Decimal(row["d"])


def window_figures(spark: Any, table: str, day: date) -> tuple[int, Decimal]:
    """Rows and total of `day` in the table, and what v2 should make them, by plain Spark SQL."""
    spark.sql(f"REFRESH TABLE {table}")
    row = spark.sql(
        f"SELECT count(*) AS n, sum(amount_eur) AS s FROM {table} WHERE sale_date = DATE'{day}'"
    ).collect()[0]
    return int(row["n"]), Decimal(row["s"])


def v2_figures(spark: Any, day: date) -> tuple[int, Decimal]:
    row = spark.sql(
        "SELECT count(*) AS n, sum(CAST(round(price_eur * CASE WHEN price_eur >= 400 THEN 0.55 ELSE 0.60 "
        f"END, 2) AS DECIMAL(12,2))) AS s FROM sales WHERE sale_date = DATE'{day}'"
    ).collect()[0]
    return int(row["n"]), Decimal(row["s"])


def breached(n: int) -> dict[str, Any]:
    """A corrective v2 backfill of DAY whose max_changed_rows is one below what v2 changes."""
    conf = {**CORRECTIVE, "thresholds": {"max_changed_rows": len(expensive(DAY)) - 1}}
    ctx = backfill(DAY, n, **conf)
    ctx["task_instance"] = ctx["ti"] = TI(ctx["run_id"])
    return ctx


def retried(ctx: dict[str, Any]) -> dict[str, Any]:
    """The same task instance's next try (the parked task cleared and run again)."""
    retry = {**ctx, "ti": TI(ctx["run_id"])}
    retry["ti"].try_number = ctx["ti"].try_number + 1
    retry["task_instance"] = retry["ti"]
    return retry


def op(conn_id: str, table: str, policy: str = "v2") -> Any:
    return guarded(guard=APPROVE_GUARD, conn_id=conn_id, table=table, policy=policy)


def park(conn_id: str, table: str, ctx: dict[str, Any]) -> None:
    with pytest.raises(TaskAwaitingInput):
        op(conn_id, table).execute(ctx)


def pending_of(history: HistoryStore, ctx: dict[str, Any]) -> Any:
    return approvals.of_attempt(history, AttemptIdentity.from_context(ctx, guarded(guard=APPROVE_GUARD)))


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_breach_parks_with_its_staging_kept_and_an_approval_commits_it_in_one_version(
    spark, spark_cluster, spark_conn, history: HistoryStore, supervisor: Supervisor, fmt: str
) -> None:
    table = make_table(spark, fmt, "payouts_appr")
    target = f"{spark_conn}:{table}"
    op(spark_conn, table, "v1").execute(scheduled(DAY, 1))
    v1 = all_days(spark, table)
    assert v1 == {DAY: day_truth(DAY, "v1")}
    before = commits(spark, table, fmt)
    changed, delta = v2_change(spark, table, DAY)
    assert changed == len(expensive(DAY)) and changed > 0

    ctx = breached(2)
    park(spark_conn, table, ctx)
    # parked: nothing committed, the staged rows kept beside the table, the request recorded
    assert commits(spark, table, fmt) == before and all_days(spark, table) == v1
    pending = pending_of(history, ctx)
    assert pending is not None and pending.status == "pending"
    assert kept_tables(spark, table) == [pending.stage_table.rsplit(".", 1)[-1]]
    assert pending.stage_table.rsplit(".", 1)[-1].startswith("_idem_apr_")
    # the sweep a guarded write of this window makes under its lock (of dead attempts' stagings)
    # leaves a kept table waiting for a decision
    adapter = SparkAdapter.from_connection(spark_conn)
    with adapter.engine.connect() as conn:
        sweep_stages(adapter, conn, table, stage_prefix(table, str(DAY)), purge=fmt == "iceberg")
    assert kept_tables(spark, table) == [pending.stage_table.rsplit(".", 1)[-1]]
    d = pending.diff
    assert (d["rows_before"], d["rows_after"], d["changed"], d["added"], d["removed"]) == (
        2000,
        2000,
        changed,
        0,
        0,
    )
    assert d["unchanged"] == 2000 - changed
    assert Decimal(str(d["measures"]["amount_eur"]["delta"])) == delta
    assert d["table_version"] == before[-1]  # the version the diff read
    assert pending.stage_rows == 2000 and pending.target_rows == 2000
    (request,) = supervisor.sent
    assert f"| 2000 | 2000 | 0 | 0 | {changed} | {2000 - changed} |" in request.body
    assert f"table version {before[-1]}" in request.body

    out = op(spark_conn, table).approval_complete(ctx, response("Approve", comment="v2 signed off"))
    after = commits(spark, table, fmt)
    assert after[:-1] == before and len(after) == len(before) + 1  # one new table version
    assert window_figures(spark, table, DAY) == v2_figures(spark, DAY) == day_truth(DAY, "v2")
    assert (out["diff"]["changed"], out["approved_by"]) == (changed, "alice")
    decided = pending_of(history, ctx)
    assert decided is not None and decided.status == "approved"
    write = history.writes(target=target)[-1]
    assert write["status"] == "written"
    assert write["message"] == f"approved by alice: v2 signed off; table version {after[-1]}"
    assert kept_tables(spark, table) == []  # dropped once decided
    if fmt == "iceberg":  # purged: an Iceberg table's files stay behind a plain DROP
        kept = (Path(spark_cluster.base_dir) / "iceberg").glob("*/_idem_apr_*/**/*")
        assert not [f for f in kept if f.is_file()]


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_an_approval_after_the_table_moved_on_is_refused_and_a_rejection_writes_nothing(
    spark, spark_conn, history: HistoryStore, supervisor: Supervisor, fmt: str
) -> None:
    table = make_table(spark, fmt, "payouts_appr_stale")
    op(spark_conn, table, "v1").execute(scheduled(DAY, 1))
    ctx = breached(2)
    park(spark_conn, table, ctx)
    diffed = commits(spark, table, fmt)[-1]
    pending = pending_of(history, ctx)
    assert pending is not None and pending.diff["table_version"] == diffed
    # someone writes the table after the diff (another day: the window itself is as diffed)
    spark.sql(f"INSERT INTO {table} VALUES (999999, 1.00, 0.60, DATE'2026-08-12')")
    moved = commits(spark, table, fmt)
    with pytest.raises(StaleApproval, match=rf"at [\w ]+ {moved[-1]}, the diff read {diffed}"):
        op(spark_conn, table).approval_complete(ctx, response("Approve"))
    assert commits(spark, table, fmt) == moved  # nothing written
    assert window_figures(spark, table, DAY) == day_truth(DAY, "v1")
    decided = pending_of(history, ctx)
    assert decided is not None and decided.status == "stale"
    assert kept_tables(spark, table) == []

    # a newer attempt supersedes a pending one (its kept table dropped); a rejection writes nothing
    first = breached(3)
    park(spark_conn, table, first)
    old = pending_of(history, first)
    second = retried(first)
    park(spark_conn, table, second)
    new = pending_of(history, second)
    assert pending_of(history, first).status == "superseded" and old.stage_table != new.stage_table
    assert kept_tables(spark, table) == [new.stage_table.rsplit(".", 1)[-1]]
    with pytest.raises(GuardRefusal, match="was rejected by bob"):
        op(spark_conn, table).approval_complete(second, response("Reject", user="bob"))
    assert commits(spark, table, fmt) == moved
    assert window_figures(spark, table, DAY) == day_truth(DAY, "v1")
    assert pending_of(history, second).status == "rejected"
    assert kept_tables(spark, table) == []
    refused = history.writes(target=f"{spark_conn}:{table}")[-1]
    assert refused["status"] == "refused" and json.loads(refused["diff"])["changed"] == len(expensive(DAY))


def test_a_parquet_table_refuses_approvals_before_anything_is_written(
    spark, spark_conn, history: HistoryStore, supervisor: Supervisor
) -> None:
    table = "payouts_appr_parquet"
    create_payouts(spark, table)
    with pytest.raises(GuardRefusal, match=r"only parquet tables lack approvals.*Delta Lake or Iceberg"):
        op(spark_conn, table).execute(breached(2))
    assert all_days(spark, table) == {} and kept_tables(spark, table) == []
    assert supervisor.sent == []

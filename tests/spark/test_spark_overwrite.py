"""PartitionOverwriteOperator on a real Spark cluster through Spark Connect.

Every expected figure comes from the scenario's formula in pure Python (payouts_spark.day_truth).
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal

import pytest

from airflow_idempotent.errors import RowsOutsideWindowError, SchemaError, UnsupportedConnectionError
from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.operators import MergeOperator
from airflow_idempotent.spark.cluster import ICEBERG_CATALOG
from tests.spark.payouts_spark import (
    DAY,
    START,
    all_days,
    context,
    create_payouts,
    day_figures,
    day_truth,
    insert_month,
    operator,
    simulate_crash,
)

pytestmark = pytest.mark.spark


def test_truth_is_the_scenarios_figure() -> None:
    assert day_truth(DAY) == (2000, Decimal("299730.00"))


@pytest.mark.parametrize("table", ["payouts_never_created", f"{ICEBERG_CATALOG}.idem.payouts_never_created"])
def test_a_missing_table_is_named_with_the_fix_and_nothing_is_created(spark, spark_conn, table) -> None:
    if table.startswith(ICEBERG_CATALOG):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.idem")
    with pytest.raises(SchemaError, match=r"does not exist in the Spark catalog: create it first"):
        operator(spark_conn, table).execute(context(DAY))
    assert not spark.catalog.tableExists(table)


def test_payouts_crash_then_three_reruns(spark, spark_conn) -> None:
    table = "payouts_crash"
    create_payouts(spark, table)
    before, after = DAY - timedelta(days=1), DAY + timedelta(days=1)
    for day in (before, after):
        operator(spark_conn, table).execute(context(day))
    neighbours = {d: day_figures(spark, table, d) for d in (before, after)}
    simulate_crash(spark, table, DAY, rows=1247)
    assert day_figures(spark, table, DAY) == (1247, 1247, Decimal("187015.80"))
    results = [operator(spark_conn, table).execute(context(DAY)) for _ in range(3)]
    rows, total = day_truth(DAY)
    assert day_figures(spark, table, DAY) == (rows, rows, total) == (2000, 2000, Decimal("299730.00"))
    assert {d: day_figures(spark, table, d) for d in (before, after)} == neighbours
    assert neighbours[before][::2] == day_truth(before)
    assert [(r["rows_deleted"], r["rows_inserted"]) for r in results] == [
        (1247, 2000),
        (2000, 2000),
        (2000, 2000),
    ]
    assert len({r["checksum"] for r in results}) == 1
    assert [r.get("ordinal") for r in results] == [1, 2, 3]
    assert [r.get("dataset_version") for r in results] == [1, 1, 1]


@pytest.mark.parametrize(("using", "days"), [("parquet", 4), ("delta", 2), ("iceberg", 2)])
def test_month_three_times_in_random_order_equals_one_clean_pass(
    spark, spark_conn, using: str, days: int
) -> None:
    """The month and some of its days, written three times in a random order (a month's backfill
    racing daily reruns): every day ends as one clean pass computes it. On Delta and Iceberg each
    write is one commit of the table format (two days a round there: a commit costs seconds)."""
    table = f"payouts_month_{using}"
    if using == "iceberg":
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.idem")
        table = f"{ICEBERG_CATALOG}.idem.{table}"
    create_payouts(spark, table, using=using)
    rng = random.Random(20260825)
    month = ("month", START)
    picked = [("day", START + timedelta(days=n)) for n in rng.sample(range(30), days)]
    for _ in range(3):
        order = [month, *picked]
        rng.shuffle(order)
        for granularity, day in order:
            operator(spark_conn, table, granularity=granularity).execute(context(day))
    truth = {START + timedelta(days=n): day_truth(START + timedelta(days=n)) for n in range(30)}
    assert all_days(spark, table) == truth
    assert sum(n for n, _ in truth.values()) == 60000


def test_month_replaces_days_the_window_no_longer_has(spark, spark_conn) -> None:
    """A month whose SELECT covers 10 days leaves no stale day behind (dynamic overwrite left 21)."""
    table = "payouts_shrink"
    create_payouts(spark, table)
    insert_month(spark, table, "v1")
    ten_days = PAYOUT_SQL + " AND s.sale_date < DATE'2026-08-11'"
    result = operator(spark_conn, table, granularity="month", sql=ten_days).execute(context(START))
    assert all_days(spark, table) == {
        START + timedelta(days=n): day_truth(START + timedelta(days=n)) for n in range(10)
    }
    assert (result["rows_deleted"], result["rows_inserted"]) == (60000, 20000)


def test_empty_window_is_emptied(spark, spark_conn) -> None:
    table = "payouts_empty"
    create_payouts(spark, table)
    for day in (DAY, DAY + timedelta(days=1)):
        operator(spark_conn, table).execute(context(day))
    nothing = PAYOUT_SQL + " AND s.sale_id < 0"
    result = operator(spark_conn, table, sql=nothing).execute(context(DAY))
    assert (result["rows_deleted"], result["rows_inserted"]) == (2000, 0)
    assert day_figures(spark, table, DAY) == (0, 0, Decimal(0))
    assert day_figures(spark, table, DAY + timedelta(days=1))[::2] == day_truth(DAY + timedelta(days=1))
    assert DAY not in {
        date.fromisoformat(str(r[0]).split("=")[1]) for r in spark.sql(f"SHOW PARTITIONS {table}").collect()
    }


def test_rows_outside_the_window_are_refused_and_nothing_changes(spark, spark_conn) -> None:
    table = "payouts_outside"
    create_payouts(spark, table)
    operator(spark_conn, table).execute(context(DAY))
    before = all_days(spark, table)
    leaky = PAYOUT_SQL.replace("s.sale_date < :window_end", "s.sale_date <= :window_end")
    with pytest.raises(
        RowsOutsideWindowError, match=r"2000 row\(s\) whose sale_date is outside .* 2026-08-26"
    ):
        operator(spark_conn, table, sql=leaky).execute(context(DAY))
    assert all_days(spark, table) == before == {DAY: day_truth(DAY)}


def test_merge_into_a_parquet_table_is_refused_with_nothing_written(spark, spark_conn) -> None:
    """Spark refuses MERGE INTO on parquet: the catalog names the format, the merge is refused
    before any write, naming the operator that does write such a table."""
    table = "payouts_parquet_merge"
    create_payouts(spark, table)
    operator(spark_conn, table).execute(context(DAY))
    before = all_days(spark, table)
    with pytest.raises(UnsupportedConnectionError, match="PartitionOverwriteOperator") as err:
        MergeOperator(
            task_id="merge_payouts",
            conn_id=spark_conn,
            table=table,
            key_columns=["sale_id"],
            partition_column="sale_date",
            sql=PAYOUT_SQL,
            parameters={"policy_version": "v2"},
            granularity="day",
            emit_asset=False,
        ).execute(context(DAY))
    assert "parquet" in str(err.value)
    assert all_days(spark, table) == before == {DAY: day_truth(DAY)}


def staging_tables(spark) -> set[str]:
    return {t.name for t in spark.catalog.listTables() if t.name.startswith("_idem_stg_")}


@pytest.mark.parametrize("meddle", ["insert", "point_back"])
def test_a_switch_changed_behind_the_operator_is_refused_by_the_listing(spark, spark_conn, meddle) -> None:
    """After its switch the operator checks, by the catalog and a listing, that the window reads
    exactly the files it staged and verified. Another writer acting between the switch and that
    check (appending a file to a day, or pointing a day back at its former directory, as a switch
    that failed would leave it) makes the write fail, naming it, instead of reporting the staged
    figures for a window that does not hold them."""
    from airflow_idempotent.spark import steps

    table = f"payouts_meddled_{meddle}"
    create_payouts(spark, table)
    operator(spark_conn, table).execute(context(DAY))
    spec = f"PARTITION (sale_date = '{DAY.isoformat()}')"
    former = next(
        str(r[1])
        for r in spark.sql(f"DESCRIBE TABLE EXTENDED {table} {spec}").collect()
        if r[0] == "Location"
    )

    def hook(step: str) -> None:
        if step != "switched":
            return
        if meddle == "insert":
            simulate_crash(spark, table, DAY, rows=3)
        else:
            spark.sql(f"ALTER TABLE {table} {spec} SET LOCATION '{former}'")

    before = staging_tables(spark)
    steps.step_hook = hook
    try:
        with pytest.raises(
            SchemaError, match=r"file\(s\), not the \d+ file\(s\) staged and verified .*another writer"
        ):
            operator(spark_conn, table, parameters={"policy_version": "v2"}).execute(context(DAY))
    finally:
        steps.step_hook = None
    # the rerun the message asks for completes the refused attempt's plan, then writes the day again
    operator(spark_conn, table, parameters={"policy_version": "v2"}).execute(context(DAY))
    rows, total = day_truth(DAY, "v2")
    assert day_figures(spark, table, DAY) == (rows, rows, total)
    assert staging_tables(spark) == before

"""The parquet partition switch's staging: its recorded count and checksum against the window read
back from the table, CHAR(n) values padded as the table reads them, rows outside the window (a
NULL partition value) refused, and a dead attempt's staging table of a plan from before plain-file
staging dropped by recovery."""

from __future__ import annotations

from datetime import date

import pendulum
import pytest

from airflow_idempotent.errors import RowsOutsideWindowError
from airflow_idempotent.history import HistoryStore, switches
from airflow_idempotent.spark.adapter import SparkAdapter
from tests.spark.payouts_spark import START, context, create_payouts, operator
from tests.spark.test_spark_disk import location
from tests.spark.test_spark_observed import COLUMNS, NEW, write_window

pytestmark = pytest.mark.spark


def read_back(conn_id: str, table: str) -> str:
    """The window's checksum by the adapter's window query over the table as it is now (a scan)."""
    adapter = SparkAdapter.from_connection(conn_id)
    with adapter.engine.connect() as conn:
        info = adapter.describe(conn, table)
        query = adapter.window_checksum(table, "d", list(info.columns.values()))
        binds = {"window_start": date(2026, 8, 1), "window_end": date(2026, 9, 1)}
        count, total = adapter.execute(conn, query, binds).one()
    return adapter.checksum_text(int(count), total)


def test_parquet_switch_checksum_equals_the_window_read_back(spark, spark_conn) -> None:
    """The count and checksum the switch records (its scan of the staged files) equal the
    switched window read back from the table, and the rows outside the window (July's) are kept."""
    table = "parquet_observed_day"
    result = write_window(spark, spark_conn, table, "parquet", "d")
    assert (result["row_count"], result["rows_deleted"]) == (4, 2)
    assert result["checksum"] == read_back(spark_conn, table)
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 6
    days = {str(r[0]) for r in spark.sql(f"SHOW PARTITIONS {table}").collect()}
    assert days == {"d=2026-07-30", "d=2026-07-31", "d=2026-08-01", "d=2026-08-15", "d=2026-08-31"}


def test_parquet_switch_checksum_of_a_char_column_equals_the_window_read_back(spark, spark_conn) -> None:
    """A CHAR(8) column is read back padded to 8: the staged rows are padded as they are typed, so
    the switch's checksum equals the window read back (before, the staging's unpadded strings
    hashed otherwise) and the values read are those an INSERT would give."""
    table = "parquet_observed_char"
    result = write_window(
        spark, spark_conn, table, "parquet", "d", COLUMNS.replace("note STRING", "note CHAR(8)")
    )
    assert result["row_count"] == 4
    assert result["checksum"] == read_back(spark_conn, table)
    notes = dict(spark.sql(f"SELECT id, note FROM {table} WHERE d >= DATE'2026-08-01'").collect())
    assert notes == {10: "a" + " " * 7, 11: None, 12: "c" + " " * 7, 13: " " * 8}


def test_parquet_switch_refuses_a_value_longer_than_its_char_column(spark, spark_conn) -> None:
    """A value longer than its CHAR(n) column is refused before the switch, as an INSERT refuses
    it, instead of being cut to n: August keeps its rows."""
    table = "parquet_observed_char_long"
    NEW.append("(14, 'too long', 1.00, NULL, DATE'2026-08-02')")
    try:
        with pytest.raises(Exception, match="longer than its CHAR column"):
            write_window(
                spark, spark_conn, table, "parquet", "d", COLUMNS.replace("note STRING", "note CHAR(7)")
            )
    finally:
        NEW.pop()
    spark.sql(f"REFRESH TABLE {table}")
    ids = {r[0] for r in spark.sql(f"SELECT id FROM {table}").collect()}
    assert ids == {1, 2, 3, 4}


def test_parquet_switch_refuses_a_null_partition_value(spark, spark_conn) -> None:
    """A row whose partition value is NULL lands in Hive's NULL directory of the staging: the
    verify counts it outside the window and names it; nothing is switched."""
    table = "parquet_observed_null"
    NEW.append("(14, 'null day', 1.00, NULL, CAST(NULL AS DATE))")
    try:
        with pytest.raises(RowsOutsideWindowError, match=r"1 row\(s\) whose d is outside .*e\.g\. None"):
            write_window(spark, spark_conn, table, "parquet", "d", where="d IS NULL OR d >= :window_start")
    finally:
        NEW.pop()
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 4


def test_recovery_drops_the_staging_table_of_a_plan_from_before_plain_files(spark, spark_conn) -> None:
    """A dead attempt's plan that names a staging table (as plans did before the staging became
    plain files) has that table dropped by the next write's recovery; a new plan names none."""
    table, orphan = "payouts_old_plan", "_idem_stg_oldplan"
    create_payouts(spark, table)
    spark.sql(f"DROP TABLE IF EXISTS {orphan}")
    spark.sql(f"CREATE TABLE {orphan} (x INT) USING parquet")
    store = HistoryStore.from_airflow()
    target = f"{spark_conn}:{table}"
    at = pendulum.datetime(START.year, START.month, START.day, tz="UTC")
    where = location(spark, table) / "_idem_attempts" / "old_plan"
    switches.begin(store, "old_plan", target, at, at.add(days=1), "s", orphan, f"file:{where}")
    operator(spark_conn, table).execute(context(START))
    assert not [t for t in spark.catalog.listTables() if t.name == orphan]
    over = switches.plans(store, target, (switches.DONE, switches.ABANDONED, switches.SWEPT))
    assert {p.attempt_id: p.status for p in over}["old_plan"] in (switches.ABANDONED, switches.SWEPT)
    assert [p.staging_table for p in over if p.attempt_id != "old_plan"] == [""]

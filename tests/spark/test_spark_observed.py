"""A Delta or Iceberg overwrite's count and checksum, taken from the rows its commit writes
(`spark.observed`), against the same figures read back at the commit's version.

The expected figure is the window checksum's own query run ``VERSION AS OF`` the commit, apart
from the write, over rows with NULLs, decimals and timestamps, and the write must not have fallen
back to that read (`observed.trusted` logs when it does; tests/test_spark_observed_trust.py).
"""

from __future__ import annotations

import logging
import uuid
from datetime import date
from typing import Any

import pendulum
import pytest

from airflow_idempotent.errors import RowsOutsideWindowError
from airflow_idempotent.operators import PartitionOverwriteOperator
from airflow_idempotent.spark.adapter import SparkAdapter
from airflow_idempotent.spark.cluster import ICEBERG_CATALOG
from airflow_idempotent.spark.delta import at_version

pytestmark = pytest.mark.spark

AUGUST = pendulum.datetime(2026, 8, 1, tz="UTC")
#: July rows (outside the window, kept) and August rows (the window), NULLs in every nullable column.
OLD = [
    "(1, 'jul', 1.50, TIMESTAMP'2026-07-30 10:00:00', DATE'2026-07-30')",
    "(2, NULL, NULL, NULL, DATE'2026-07-31')",
    "(3, 'aug-old', 9.99, TIMESTAMP'2026-08-03 00:00:01', DATE'2026-08-03')",
    "(4, 'aug-old', 8.00, NULL, DATE'2026-08-20')",
]
NEW = [
    "(10, 'a', 1.01, TIMESTAMP'2026-08-01 00:00:00', DATE'2026-08-01')",
    "(11, NULL, 2.00, TIMESTAMP'2026-08-15 12:30:00.123456', DATE'2026-08-15')",
    "(12, 'c', NULL, NULL, DATE'2026-08-15')",
    "(13, '', -0.01, TIMESTAMP'2026-08-31 23:59:59', DATE'2026-08-31')",
]
COLUMNS = "id BIGINT, note STRING, amount DECIMAL(12,2), at TIMESTAMP, d DATE"


def rows_sql(values: list[str]) -> str:
    return f"SELECT * FROM VALUES {', '.join(values)} AS v(id, note, amount, at, d)"


def write_window(
    spark: Any,
    conn_id: str,
    table: str,
    using: str,
    by: str | None,
    columns: str = COLUMNS,
    where: str = "d >= :window_start AND d < :window_end",
) -> dict[str, Any]:
    """`table` created (partitioned `by`) holding OLD (one file when not partitioned: July's and
    August's rows together), then August replaced by NEW through the operator; its result."""
    source = f"obs_src_{uuid.uuid4().hex[:8]}"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} ({columns}) USING {using}{f' PARTITIONED BY ({by})' if by else ''}")
    spark.sql(f"INSERT INTO {table} {rows_sql(OLD)} ")
    if not by:
        spark.sql(f"INSERT OVERWRITE {table} SELECT /*+ COALESCE(1) */ * FROM {table}")
    spark.sql(f"CREATE TABLE {source} USING parquet AS {rows_sql(NEW)}")
    try:
        task = PartitionOverwriteOperator(
            task_id=f"observed_{table.replace('.', '_')}",
            conn_id=conn_id,
            table=table,
            partition_column="d",
            sql=f"SELECT id, note, amount, at, d FROM {source} WHERE {where}",
            granularity="month",
            emit_asset=False,
        )
        dates = ("logical_date", "data_interval_start", "data_interval_end")
        return task.execute(dict.fromkeys(dates, AUGUST))
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {source}")


def read_at_version(conn_id: str, table: str, version: int) -> str:
    """The window's checksum by the adapter's window query, run VERSION AS OF `version`."""
    adapter = SparkAdapter.from_connection(conn_id)
    with adapter.engine.connect() as conn:
        info = adapter.describe(conn, table)
        query = at_version(adapter.window_checksum(table, "d", list(info.columns.values())), version)
        binds = {"window_start": date(2026, 8, 1), "window_end": date(2026, 9, 1)}
        count, total = adapter.execute(conn, query, binds).one()
    return adapter.checksum_text(int(count), total)


def fell_back(caplog: pytest.LogCaptureFixture) -> bool:
    return any(r.name == "airflow_idempotent.spark.observed" for r in caplog.records)


@pytest.mark.parametrize("partitioned", [True, False], ids=["by-day", "one-file"])
def test_delta_observed_checksum_equals_the_one_read_at_the_version(
    spark, spark_conn, caplog, partitioned
) -> None:
    """Partitioned, or one file holding July and August (rows copied back, numCopiedRows): the
    observed figures are trusted and equal the version's."""
    caplog.set_level(logging.INFO, logger="airflow_idempotent.spark.observed")
    table = f"delta_observed_{'part' if partitioned else 'flat'}"
    result = write_window(spark, spark_conn, table, "delta", "d" if partitioned else None)
    assert result["row_count"] == 4 and result["rows_deleted"] == 2
    assert result["checksum"] == read_at_version(spark_conn, table, result["table_version"])
    assert not fell_back(caplog)
    metrics = spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["operationMetrics"]
    assert int(metrics["numCopiedRows"]) == (0 if partitioned else 2)
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 6


def test_iceberg_observed_checksum_equals_the_one_read_at_the_version(spark, spark_conn, caplog) -> None:
    """Partitioned by day (Iceberg refuses to overwrite a file only partly in the window, by SQL
    as by DataFrame, so no rows are copied back): trusted, equal."""
    caplog.set_level(logging.INFO, logger="airflow_idempotent.spark.observed")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.idem")
    table = f"{ICEBERG_CATALOG}.idem.observed_day"
    result = write_window(spark, spark_conn, table, "iceberg", "d")
    assert result["row_count"] == 4 and result["rows_deleted"] == 2
    assert result["checksum"] == read_at_version(spark_conn, table, result["table_version"])
    assert not fell_back(caplog)
    spark.sql(f"REFRESH TABLE {table}")
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 6


def test_a_char_column_is_read_at_the_version(spark, spark_conn, caplog) -> None:
    """CHAR(n) is padded when read, not when written: the rows as written would hash unlike the
    rows read back, so the write reads the window at its version (logged) and the figures agree."""
    caplog.set_level(logging.INFO, logger="airflow_idempotent.spark.observed")
    table = "delta_observed_char"
    result = write_window(
        spark, spark_conn, table, "delta", "d", COLUMNS.replace("note STRING", "note CHAR(8)")
    )
    assert result["row_count"] == 4
    assert result["checksum"] == read_at_version(spark_conn, table, result["table_version"])
    assert fell_back(caplog)


def read_back(conn_id: str, table: str) -> str:
    """The window's checksum by the adapter's window query over the table as it is now (a scan)."""
    adapter = SparkAdapter.from_connection(conn_id)
    with adapter.engine.connect() as conn:
        info = adapter.describe(conn, table)
        query = adapter.window_checksum(table, "d", list(info.columns.values()))
        binds = {"window_start": date(2026, 8, 1), "window_end": date(2026, 9, 1)}
        count, total = adapter.execute(conn, query, binds).one()
    return adapter.checksum_text(int(count), total)


def test_parquet_switch_checksum_equals_the_window_read_back(spark, spark_conn, caplog) -> None:
    """The partition switch counts and hashes the staged rows as its staging write writes them
    (no scan of the staging): the figures equal the switched window read back from its files,
    and the rows outside the window (July's) are kept."""
    caplog.set_level(logging.INFO, logger="airflow_idempotent.spark.switch")
    table = "parquet_observed_day"
    result = write_window(spark, spark_conn, table, "parquet", "d")
    assert (result["row_count"], result["rows_deleted"]) == (4, 2)
    assert result["checksum"] == read_back(spark_conn, table)
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 6
    days = {str(r[0]) for r in spark.sql(f"SHOW PARTITIONS {table}").collect()}
    assert days == {"d=2026-07-30", "d=2026-07-31", "d=2026-08-01", "d=2026-08-15", "d=2026-08-31"}
    assert not any("no observed figures" in r.getMessage() for r in caplog.records)


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


def test_parquet_switch_refuses_a_null_partition_value_from_the_observed_write(spark, spark_conn) -> None:
    """A row whose partition value is NULL lands in Hive's NULL directory of the staging: the
    observed write counts it outside the window and names it; nothing is switched."""
    table = "parquet_observed_null"
    NEW.append("(14, 'null day', 1.00, NULL, CAST(NULL AS DATE))")
    try:
        with pytest.raises(RowsOutsideWindowError, match=r"1 row\(s\) whose d is outside .*e\.g\. None"):
            write_window(spark, spark_conn, table, "parquet", "d", where="d IS NULL OR d >= :window_start")
    finally:
        NEW.pop()
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 4

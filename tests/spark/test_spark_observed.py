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

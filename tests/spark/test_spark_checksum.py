"""The Spark window checksum (version 2) on a real cluster: what changes it and what does not.

Each case holds rows that differ from a base set in one way and compares the checksums the
adapter's query computes over them; the expected answer (same or different) is the definition's
promise, not a value read from the code under test. The value itself is checked against SQL
written by hand in the Delta and Iceberg tests (`payouts_spark.checksum_at`).
"""

from __future__ import annotations

import uuid
from datetime import date

import pytest

from airflow_idempotent.adapters.schema import ColumnInfo
from airflow_idempotent.checksum import checksum_version
from airflow_idempotent.spark.adapter import SparkAdapter

pytestmark = pytest.mark.spark

#: The view's columns and their types: the rows below are cast to them.
TYPES = {
    "id": "BIGINT",
    "a": "STRING",
    "b": "STRING",
    "n": "DECIMAL(12,2)",
    "d": "DATE",
    "ts": "TIMESTAMP",
    "m": "MAP<STRING,INT>",
}
BASE = [
    "(1, 'x', 'y', 1.50, DATE'2026-08-01', TIMESTAMP'2026-08-01 10:00:00', map('k', 1))",
    "(2, NULL, 'a', 2.00, DATE'2026-08-01', NULL, NULL)",
    "(3, 'z', NULL, NULL, DATE'2026-08-01', TIMESTAMP'2026-08-01 11:00:00', map('k', 2))",
]


VARIANTS = {
    "base": BASE,
    "reversed": list(reversed(BASE)),  # order does not count: equal to base
    # a value swapped between two columns of one type, one of them NULL
    "swap with NULL": [BASE[0], "(2, 'a', NULL, 2.00, DATE'2026-08-01', NULL, NULL)", BASE[2]],
    # NULL against the empty string
    "NULL vs ''": [BASE[0], "(2, '', 'a', 2.00, DATE'2026-08-01', NULL, NULL)", BASE[2]],
    # a decimal changed by one cent
    "decimal": [BASE[0].replace("1.50", "1.51"), BASE[1], BASE[2]],
    # a timestamp changed by one second
    "timestamp": [BASE[0].replace("10:00:00", "10:00:01"), BASE[1], BASE[2]],
    # a value moved from one row to another (column a of rows 1 and 3)
    "moved between rows": [BASE[0].replace("'x'", "'z'"), BASE[1], BASE[2].replace("'z'", "'x'", 1)],
    # a map's value (a MAP column is hashed as its text)
    "map": [BASE[0].replace("map('k', 1)", "map('k', 9)"), BASE[1], BASE[2]],
}


def test_spark_checksum_v2_sees_values_and_nulls_not_order(spark, spark_conn) -> None:
    """Every variant in one global temporary view (in memory, visible to the adapter's session),
    told apart by a `variant` column the checksum does not hash: one query for all (the staging
    verify's per-partition form), the window's own query for the base with a row outside it."""
    adapter = SparkAdapter.from_connection(spark_conn)
    columns = [ColumnInfo(c, t.lower(), "other", True) for c, t in TYPES.items()]
    typed = ", ".join(f"CAST({c} AS {t}) AS {c}" for c, t in TYPES.items())
    outside = BASE[0].replace("2026-08-01'", "2026-08-02'", 1)  # a row of the next day
    tagged = [f"('{name}', {row[1:]}" for name, rows in VARIANTS.items() for row in rows]
    tagged.append(f"('base', {outside[1:]}")
    view = f"chk_{uuid.uuid4().hex[:10]}"
    spark.sql(
        f"CREATE GLOBAL TEMPORARY VIEW {view} AS SELECT variant, {typed} FROM VALUES {', '.join(tagged)} "
        f"AS v(variant, {', '.join(TYPES)})"
    )
    try:
        with adapter.engine.connect() as conn:
            per = adapter.partition_stats(f"global_temp.{view}", "variant", columns)
            by = {
                v: adapter.checksum_text(int(n), total)
                for v, n, total in adapter.execute(conn, per, {}).all()
            }
            window = adapter.window_checksum(f"global_temp.{view}", "d", columns).where("variant = 'base'")
            binds = {"window_start": date(2026, 8, 1), "window_end": date(2026, 8, 2)}
            count, total = adapter.execute(conn, window, binds).one()
            empty = {"window_start": date(2026, 9, 1), "window_end": date(2026, 9, 2)}
            nothing = adapter.execute(conn, window, empty).one()
    finally:
        spark.sql(f"DROP VIEW IF EXISTS global_temp.{view}")
    base = adapter.checksum_text(int(count), total)  # the row outside the window does not count
    assert checksum_version(base) == "v2" and base.startswith("v2:3:")
    assert by["base"].startswith("v2:4:")  # the per-partition form has no window: 4 rows
    assert by["reversed"] == base
    changed = {name: value for name, value in by.items() if name not in ("base", "reversed")}
    for name, value in changed.items():
        assert value != base, name
    assert len(set(changed.values())) == len(changed) == 6
    assert adapter.checksum_text(int(nothing[0]), nothing[1]) == "v2:0:0"


def test_spark_checksum_sum_is_the_decimal_sum_of_the_row_hashes(spark, spark_conn) -> None:
    """The sum taken in BIGINT slices (`SparkAdapter.hash_total`) is, to the digit, the definition's
    sum of each row hash as DECIMAL(38,0), written here by hand: over 20,000 rows (their hashes'
    sum far outside a BIGINT, both signs summed), BIGINT extremes and NULLs included."""
    adapter = SparkAdapter.from_connection(spark_conn)
    view = f"chk_{uuid.uuid4().hex[:10]}"
    spark.sql(
        f"CREATE GLOBAL TEMPORARY VIEW {view} AS SELECT id AS k, IF(id % 7 = 0, NULL, id * 7919) AS v, "
        "DATE'2026-08-01' AS d FROM range(0, 20000) UNION ALL SELECT 9223372036854775807, "
        "-9223372036854775808, DATE'2026-08-01' UNION ALL SELECT -1, NULL, DATE'2026-08-01'"
    )
    hashed = "xxhash64(k, v, CAST(IF(k IS NULL, 1, 0) + IF(v IS NULL, 2, 0) AS BIGINT))"
    try:
        columns = [ColumnInfo("k", "bigint", "other", True), ColumnInfo("v", "bigint", "other", True)]
        window = adapter.window_checksum(f"global_temp.{view}", "d", columns)
        binds = {"window_start": date(2026, 8, 1), "window_end": date(2026, 8, 2)}
        with adapter.engine.connect() as conn:
            count, total = adapter.execute(conn, window, binds).one()
        by_hand = spark.sql(
            f"SELECT count(*) AS n, sum(CAST({hashed} AS DECIMAL(38,0))) AS s, "
            f"min({hashed}) AS low, max({hashed}) AS high FROM global_temp.{view}"
        ).collect()[0]
    finally:
        spark.sql(f"DROP VIEW IF EXISTS global_temp.{view}")
    assert by_hand["low"] < 0 < by_hand["high"]
    assert abs(by_hand["s"]) > 2**63  # one BIGINT SUM would have overflowed
    assert adapter.checksum_text(int(count), total) == f"v2:20002:{by_hand['s']}"

"""The payouts scenario on Spark for the tests: tables, the crash, and the truth in pure Python."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pendulum

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator

START = date(2026, 8, 1)
DAY = date(2026, 8, 25)
PER_DAY = 2000
DAYS = 30
#: The table's columns in the order the checksum hashes them (sorted by name), for the hand-written SQL.
SORTED_COLUMNS = ("amount_eur", "rate", "sale_date", "sale_id")

SALES_SQL = (
    "CREATE TABLE IF NOT EXISTS sales USING parquet AS "
    "SELECT id AS sale_id, date_add(DATE'2026-08-01', CAST((id - 1) DIV 2000 AS INT)) AS sale_date, "
    "CAST(round(25 + ((id * 37) % 900) * 0.5, 2) AS DECIMAL(8,2)) AS price_eur FROM range(1, 60001)"
)


def amount(i: int, policy: str = "v1") -> Decimal:
    price = Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")
    rate = Decimal("0.55") if policy == "v2" and price >= 400 else Decimal("0.60")
    return (price * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def day_truth(day: date, policy: str = "v1") -> tuple[int, Decimal]:
    """Rows and total of one day's payouts, from the scenario's formula."""
    if not START <= day < START + timedelta(days=DAYS):
        return 0, Decimal("0")
    first = (day - START).days * PER_DAY + 1
    return PER_DAY, sum((amount(i, policy) for i in range(first, first + PER_DAY)), Decimal("0"))


def create_payouts(
    spark: Any, table: str, using: str = "parquet", partitioned_by: str | None = "sale_date"
) -> None:
    """The sales (once) and an empty payouts `table` of format `using`, partitioned by day (or by
    `partitioned_by`, e.g. an Iceberg transform; None: not partitioned)."""
    spark.sql(SALES_SQL)
    spark.sql(f"DROP TABLE IF EXISTS {table}{' PURGE' if using == 'iceberg' else ''}")
    spark.sql(
        f"CREATE TABLE {table} (sale_id BIGINT, amount_eur DECIMAL(12,2), rate DECIMAL(4,2), sale_date DATE) "
        f"USING {using}" + (f" PARTITIONED BY ({partitioned_by})" if partitioned_by else "")
    )


def insert_month(spark: Any, table: str, policy: str = "v1") -> None:
    """The month's payouts under `policy`, written by a plain Spark INSERT (no product code): the
    starting table of a case whose killed write is the second one."""
    spark.sql(
        f"INSERT INTO {table} SELECT p.sale_id, p.amount_eur, p.rate, p.sale_date FROM ({PAYOUT_SQL}) p",
        args={"window_start": START, "window_end": START + timedelta(days=DAYS), "policy_version": policy},
    )


def simulate_crash(spark: Any, table: str, day: date, rows: int = 1247) -> None:
    """What a crashed plain writer leaves: the first `rows` v1 payouts of `day`, appended."""
    spark.sql(
        f"INSERT INTO {table} SELECT p.sale_id, p.amount_eur, p.rate, p.sale_date FROM ({PAYOUT_SQL}) p "
        "ORDER BY p.sale_id LIMIT :rows",
        args={
            "window_start": day,
            "window_end": day + timedelta(days=1),
            "policy_version": "v1",
            "rows": rows,
        },
    )


def day_figures(spark: Any, table: str, day: date) -> tuple[int, int, Decimal]:
    """Rows, distinct sale ids and total of one day as a fresh reader sees them."""
    spark.sql(f"REFRESH TABLE {table}")
    row = spark.sql(
        f"SELECT count(*) AS n, count(DISTINCT sale_id) AS k, coalesce(sum(amount_eur), 0) AS s "
        f"FROM {table} WHERE sale_date = DATE'{day.isoformat()}'"
    ).collect()[0]
    return int(row["n"]), int(row["k"]), Decimal(row["s"])


def all_days(spark: Any, table: str) -> dict[date, tuple[int, Decimal]]:
    spark.sql(f"REFRESH TABLE {table}")
    rows = spark.sql(
        f"SELECT sale_date, count(*) AS n, sum(amount_eur) AS s FROM {table} GROUP BY sale_date"
    ).collect()
    return {r["sale_date"]: (int(r["n"]), Decimal(r["s"])) for r in rows}


def context(day: date) -> dict[str, Any]:
    at = pendulum.datetime(day.year, day.month, day.day, tz="UTC")
    return {"logical_date": at, "data_interval_start": at, "data_interval_end": at}


def checksum_at(spark: Any, table: str, at: int, start: date, end: date) -> str:
    """The window's checksum at version `at` (a Delta version, an Iceberg snapshot id), by SQL
    written here (version 2): Spark's xxhash64 of the typed columns by name, then a BIGINT with
    bit i set when column i is NULL, summed as DECIMAL(38,0), 'v2:<rows>:<sum>'."""
    columns = ", ".join(SORTED_COLUMNS)
    nulls = " + ".join(f"CASE WHEN {c} IS NULL THEN {2**i} ELSE 0 END" for i, c in enumerate(SORTED_COLUMNS))
    row = spark.sql(
        f"SELECT count(*) AS n, coalesce(sum(CAST(xxhash64({columns}, CAST({nulls} AS BIGINT)) "
        f"AS DECIMAL(38,0))), 0) AS s FROM {table} VERSION AS OF {int(at)} "
        f"WHERE sale_date >= DATE'{start.isoformat()}' AND sale_date < DATE'{end.isoformat()}'"
    ).collect()[0]
    return f"v2:{int(row['n'])}:{row['s']}"


def merge_operator(conn_id: str, table: str, **kwargs: Any) -> MergeOperator:
    return MergeOperator(**_options(conn_id, table, "merge", key_columns=["sale_id"], **kwargs))


def operator(conn_id: str, table: str, **kwargs: Any) -> PartitionOverwriteOperator:
    return PartitionOverwriteOperator(**_options(conn_id, table, "write", **kwargs))


def _options(conn_id: str, table: str, verb: str, **kwargs: Any) -> dict[str, Any]:
    """The scenario's operator arguments; the task id from the table's name (dots replaced)."""
    options: dict[str, Any] = {
        "task_id": f"{verb}_{table.replace('.', '_')}",
        "conn_id": conn_id,
        "table": table,
        "partition_column": "sale_date",
        "sql": PAYOUT_SQL,
        "parameters": {"policy_version": "v1"},
        "granularity": "day",
        "emit_asset": False,
    }
    options.update(kwargs)
    return options

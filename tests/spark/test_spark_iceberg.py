"""The operators on Apache Iceberg tables, on the session's cluster (its Connect server has an
Iceberg catalog `ice`: JDBC in PostgreSQL, files on local disk).

Every expected figure comes from the payouts scenario's formula in pure Python
(payouts_spark.day_truth) or from SQL written here by hand, never from the code under test; the
snapshots are read from Iceberg's own metadata tables.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from airflow_idempotent.errors import MergeKeyError, RowsOutsideWindowError, SchemaError
from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.spark.adapter import (
    SparkAdapter,
    SparkConnection,
    SparkEngine,
    inline_params,
    partition_fields,
)
from airflow_idempotent.spark.cluster import ICEBERG_CATALOG
from airflow_idempotent.spark.partitioning import window_fit
from tests.spark.payouts_spark import (
    DAY,
    DAYS,
    START,
    all_days,
    amount,
    checksum_at,
    context,
    create_payouts,
    day_figures,
    day_truth,
    insert_month,
    merge_operator,
    operator,
    simulate_crash,
)

pytestmark = pytest.mark.spark

NEXT = DAY + timedelta(days=1)
PARIS = timezone(timedelta(hours=2))


def ice(name: str) -> str:
    return f"{ICEBERG_CATALOG}.idem.{name}"


def create_iceberg_payouts(spark: Any, name: str, partitioned_by: str | None = "sale_date") -> str:
    """An empty Iceberg payouts table `name` in the session's Iceberg catalog; its full name."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.idem")
    create_payouts(spark, ice(name), using="iceberg", partitioned_by=partitioned_by)
    return ice(name)


def snapshots(spark: Any, table: str) -> list[Any]:
    """The table's snapshots, oldest first, from its metadata table (refreshed: the session's
    Iceberg catalog caches the table's metadata, and the operator commits from its own session)."""
    spark.sql(f"REFRESH TABLE {table}")
    return spark.sql(
        f"SELECT snapshot_id, parent_id, operation, summary FROM {table}.snapshots ORDER BY committed_at"
    ).collect()


def head(spark: Any, table: str) -> int | None:
    spark.sql(f"REFRESH TABLE {table}")
    rows = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return int(rows[0]["snapshot_id"]) if rows else None


def test_payouts_crash_then_three_reruns_on_iceberg(spark, spark_conn, history) -> None:
    """Crash after 1,247 rows, three reruns: 2,000 rows / 299,730.00, neighbours untouched, each rerun
    one snapshot whose id, count and checksum the result and the history record carry."""
    table = create_iceberg_payouts(spark, "payouts_crash")
    before = DAY - timedelta(days=1)
    for day in (before, NEXT):
        operator(spark_conn, table).execute(context(day))
    neighbours = {d: day_figures(spark, table, d) for d in (before, NEXT)}
    simulate_crash(spark, table, DAY, rows=1247)
    assert day_figures(spark, table, DAY) == (1247, 1247, Decimal("187015.80"))
    first = len(snapshots(spark, table))
    results = [operator(spark_conn, table).execute(context(DAY)) for _ in range(3)]
    rows, total = day_truth(DAY)
    assert day_figures(spark, table, DAY) == (rows, rows, total) == (2000, 2000, Decimal("299730.00"))
    assert {d: day_figures(spark, table, d) for d in (before, NEXT)} == neighbours
    assert neighbours[before][::2] == day_truth(before)
    assert [(r["rows_deleted"], r["rows_inserted"]) for r in results] == [
        (1247, 2000),
        (2000, 2000),
        (2000, 2000),
    ]
    # one snapshot per rerun, each the child of the one before, tagged with the attempt's window
    after = snapshots(spark, table)
    assert len(after) == first + 3
    assert [r["table_version"] for r in results] == [int(s["snapshot_id"]) for s in after[first:]]
    assert results[-1]["table_version"] == head(spark, table)
    for r, snap in zip(results, after[first:], strict=True):
        assert snap["operation"] == "overwrite"
        assert int(snap["summary"]["added-records"]) == 2000
        assert (
            json.loads(snap["summary"]["airflow-idempotent"])["airflow_idempotent"]["window"] == "2026-08-25"
        )
        assert r["checksum"] == checksum_at(spark, table, r["table_version"], DAY, NEXT)
    assert len({r["checksum"] for r in results}) == 1
    # history: each write's count, checksum and snapshot id, as the independent query gives them
    written = [w for w in history.writes(target=f"{spark_conn}:{table}") if w["window_label"] == "2026-08-25"]
    assert [w["ordinal"] for w in written] == [1, 2, 3]
    for w, r in zip(written, results, strict=True):
        assert (w["row_count"], w["checksum"]) == (
            2000,
            checksum_at(spark, table, r["table_version"], DAY, NEXT),
        )
        assert w["message"] == f"table version {r['table_version']}"


def test_rows_outside_the_window_are_refused_with_nothing_committed(spark, spark_conn) -> None:
    table = create_iceberg_payouts(spark, "payouts_outside")
    operator(spark_conn, table).execute(context(DAY))
    before, first = all_days(spark, table), head(spark, table)
    leaky = PAYOUT_SQL.replace("s.sale_date < :window_end", "s.sale_date <= :window_end")
    with pytest.raises(
        RowsOutsideWindowError, match=r"2000 row\(s\) whose sale_date is outside .* 2026-08-26.*nothing"
    ):
        operator(spark_conn, table, sql=leaky).execute(context(DAY))
    assert head(spark, table) == first
    assert all_days(spark, table) == before == {DAY: day_truth(DAY)}


def test_empty_window_is_emptied_in_one_snapshot(spark, spark_conn) -> None:
    table = create_iceberg_payouts(spark, "payouts_empty")
    empty_day = START + timedelta(days=DAYS + 5)  # no sales that day: the SELECT returns nothing
    spark.sql(
        f"INSERT INTO {table} VALUES (1, 1.00, 0.60, DATE'{empty_day}'), (2, 2.00, 0.60, DATE'{empty_day}')"
    )
    operator(spark_conn, table).execute(context(DAY))
    first = head(spark, table)
    result = operator(spark_conn, table).execute(context(empty_day))
    assert (result["rows_deleted"], result["rows_inserted"], result["row_count"]) == (2, 0, 0)
    last = snapshots(spark, table)[-1]
    assert (int(last["parent_id"]), int(last["snapshot_id"])) == (first, result["table_version"])
    assert int(last["summary"]["deleted-records"]) == 2
    assert day_figures(spark, table, empty_day) == (0, 0, Decimal("0"))
    assert day_figures(spark, table, DAY)[::2] == day_truth(DAY)


def test_month_is_replaced_whole_in_one_snapshot(spark, spark_conn) -> None:
    """A month over daily partitions in one snapshot: a stale day the SELECT no longer has goes too,
    the months around it stay."""
    table = create_iceberg_payouts(spark, "payouts_month")
    insert_month(spark, table, policy="v1")
    stale = date(2026, 8, 31)  # in the month, but the sales end on 2026-08-30
    july, september = date(2026, 7, 31), date(2026, 9, 1)
    spark.sql(
        f"INSERT INTO {table} VALUES (900001, 9.99, 0.60, DATE'{stale}'), "
        f"(900002, 1.00, 0.60, DATE'{july}'), (900003, 2.00, 0.60, DATE'{september}')"
    )
    first = head(spark, table)
    result = operator(spark_conn, table, granularity="month", parameters={"policy_version": "v2"}).execute(
        context(START)
    )
    last = snapshots(spark, table)[-1]
    assert (int(last["parent_id"]), int(last["snapshot_id"])) == (first, result["table_version"])
    assert (result["rows_deleted"], result["rows_inserted"]) == (DAYS * 2000 + 1, DAYS * 2000)
    days = all_days(spark, table)
    for offset in range(DAYS):
        day = START + timedelta(days=offset)
        assert days[day] == day_truth(day, "v2")
    assert stale not in days
    assert days[july] == (1, Decimal("1.00")) and days[september] == (1, Decimal("2.00"))


def test_merge_payouts_crash_then_three_reruns(spark, spark_conn, history) -> None:
    table = create_iceberg_payouts(spark, "merge_crash")
    merge_operator(spark_conn, table).execute(context(NEXT))
    neighbour = day_figures(spark, table, NEXT)
    simulate_crash(spark, table, DAY, rows=1247)
    first = len(snapshots(spark, table))
    results = [merge_operator(spark_conn, table).execute(context(DAY)) for _ in range(3)]
    assert day_figures(spark, table, DAY) == (2000, 2000, Decimal("299730.00"))
    assert day_figures(spark, table, NEXT) == neighbour
    assert neighbour[::2] == day_truth(NEXT)
    assert [(r["rows_inserted"], r["rows_updated"], r["source_rows"]) for r in results] == [
        (753, 1247, 2000),
        (0, 2000, 2000),
        (0, 2000, 2000),
    ]
    after = snapshots(spark, table)
    assert [r["table_version"] for r in results] == [int(s["snapshot_id"]) for s in after[first:]]
    for r in results:
        assert r["checksum"] == checksum_at(spark, table, r["table_version"], DAY, NEXT)
    written = [w for w in history.writes(target=f"{spark_conn}:{table}") if w["window_label"] == "2026-08-25"]
    assert [(w["row_count"], w["checksum"], w["message"]) for w in written] == [
        (2000, r["checksum"], f"table version {r['table_version']}") for r in results
    ]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (
            "UNION ALL SELECT sale_id, sale_date, 1.00, 0.60 FROM sales WHERE sale_id = 48001",
            "48001 (2 rows)",
        ),
        ("UNION ALL SELECT CAST(NULL AS BIGINT), DATE'2026-08-25', 1.00, 0.60", "NULL key"),
    ],
    ids=["repeated", "null"],
)
def test_merge_refuses_repeated_and_null_keys_with_nothing_written(spark, spark_conn, extra, named) -> None:
    table = create_iceberg_payouts(spark, f"merge_keys_{'null' if 'NULL' in extra else 'repeated'}")
    merge_operator(spark_conn, table).execute(context(DAY))
    before, first = all_days(spark, table), head(spark, table)
    assert (DAY - START).days * 2000 + 1 == 48001  # the day's first sale, repeated by `extra`
    with pytest.raises(MergeKeyError, match=r"nothing was written") as err:
        merge_operator(
            spark_conn, table, sql=f"{PAYOUT_SQL} {extra}", parameters={"policy_version": "v2"}
        ).execute(context(DAY))
    assert named in str(err.value)
    assert head(spark, table) == first
    assert all_days(spark, table) == before == {DAY: day_truth(DAY)}


def test_merge_delete_missing_deletes_only_the_windows_missing_rows(spark, spark_conn) -> None:
    table = create_iceberg_payouts(spark, "merge_delete_missing")
    for day in (DAY, NEXT):
        merge_operator(spark_conn, table).execute(context(day))
    fewer = PAYOUT_SQL + " AND s.sale_id % 10 <> 0"
    result = merge_operator(spark_conn, table, sql=fewer, delete_missing=True).execute(context(DAY))
    first = (DAY - START).days * 2000 + 1
    ids = [i for i in range(first, first + 2000) if i % 10]
    assert day_figures(spark, table, DAY) == (1800, 1800, sum((amount(i) for i in ids), Decimal("0")))
    assert (result["rows_deleted"], result["rows_inserted"], result["row_count"]) == (200, 0, 1800)
    assert day_figures(spark, table, NEXT)[::2] == day_truth(NEXT)  # the next day keeps its 10s


def test_three_part_name_on_a_sql_engine_is_refused() -> None:
    """A catalog part is Spark's: on a SQL engine's adapter the name is refused, naming the fix."""
    from airflow_idempotent.adapters.identifiers import split_table_name, table_parts
    from airflow_idempotent.errors import InvalidIdentifierError

    assert table_parts("ice.idem.payouts") == ("ice", "idem", "payouts")
    with pytest.raises(InvalidIdentifierError, match="names a catalog"):
        split_table_name("ice.idem.payouts")
    with pytest.raises(InvalidIdentifierError, match="more than two dots"):
        table_parts("a.b.c.d")


# ---------------------------------------------------------------- partitioned by a transform, or not at all
#: One sale in 50 (40 a day): the partitioning cases need rows in files, not volume.
SPARSE = PAYOUT_SQL + " AND s.sale_id % 50 = 0"


def sparse_truth(first: date, after: date, policy: str = "v1") -> dict[date, tuple[int, Decimal]]:
    """Rows and total of each day of [first, after) under SPARSE, from the scenario's formula."""
    out: dict[date, tuple[int, Decimal]] = {}
    for offset in range((after - first).days):
        day = first + timedelta(days=offset)
        if not START <= day < START + timedelta(days=DAYS):
            continue  # no sales that day
        base = (day - START).days * 2000
        ids = [i for i in range(base + 1, base + 2001) if i % 50 == 0]
        out[day] = (len(ids), sum((amount(i, policy) for i in ids), Decimal("0")))
    return out


def test_months_partitioned_table_takes_whole_months_and_refuses_a_day(spark, spark_conn) -> None:
    """PARTITIONED BY (months(sale_date)): described (Spark's listColumns refuses such a table,
    UNSUPPORTED_PARTITION_TRANSFORM); a month window is one snapshot whose figures are the month's
    at it, rows outside it refused before the commit; a day of it is refused before anything is
    written, naming the partitioning and the fix."""

    table = create_iceberg_payouts(spark, "payouts_months", partitioned_by="months(sale_date)")
    adapter = SparkAdapter(SparkEngine("sc://unused"))
    info = adapter.describe(SparkConnection(spark, "test"), table)
    assert (info.partitioning, info.partition_columns, info.provider) == (
        ("months(sale_date)",),
        (),
        "iceberg",
    )
    assert dict(info.spark_types or {}) == {
        "sale_id": "bigint",
        "amount_eur": "decimal(12,2)",
        "rate": "decimal(4,2)",
        "sale_date": "date",
    }
    stale, july, september = date(2026, 8, 31), date(2026, 7, 31), date(2026, 9, 1)
    spark.sql(
        f"INSERT INTO {table} VALUES (900001, 9.99, 0.60, DATE'{stale}'), "
        f"(900002, 1.00, 0.60, DATE'{july}'), (900003, 2.00, 0.60, DATE'{september}')"
    )
    first = head(spark, table)
    month = operator(spark_conn, table, sql=SPARSE, granularity="month").execute(context(START))
    last = snapshots(spark, table)[-1]
    assert (int(last["parent_id"]), int(last["snapshot_id"])) == (first, month["table_version"])
    truth = sparse_truth(START, september)
    rows = sum(n for n, _ in truth.values())
    assert (
        (month["rows_deleted"], month["rows_inserted"], month["row_count"])
        == (1, rows, rows)
        == (1, 1200, 1200)
    )
    assert month["checksum"] == checksum_at(spark, table, month["table_version"], START, september)
    days = all_days(spark, table)
    assert {d: v for d, v in days.items() if START <= d < september} == truth
    assert days[july] == (1, Decimal("1.00")) and days[september] == (1, Decimal("2.00"))
    shifted = SPARSE.replace("s.sale_date,", "date_add(s.sale_date, 2) AS sale_date,", 1)
    with pytest.raises(RowsOutsideWindowError, match=r"40 row\(s\) whose sale_date is outside"):
        operator(spark_conn, table, sql=shifted, granularity="month").execute(context(START))
    assert head(spark, table) == month["table_version"]
    with pytest.raises(
        SchemaError, match=r"2026-08-25 of ice\.idem\.payouts_months.*months\(sale_date\)"
    ) as err:
        operator(spark_conn, table, sql=SPARSE).execute(context(DAY))
    assert "granularity='month'" in str(err.value) and "Nothing was written" in str(err.value)
    assert head(spark, table) == month["table_version"]
    assert all_days(spark, table) == days


def test_a_file_partly_in_the_window_is_refused_then_merged(spark, spark_conn) -> None:
    """An unpartitioned table whose one data file holds two days: Iceberg cannot overwrite one of
    them (it removes whole files), so the overwrite is refused naming the table, the window, the
    partitioning and the fix, nothing committed; the fix it names, a merge with delete_missing,
    rewrites that file in one snapshot."""

    table = create_iceberg_payouts(spark, "payouts_unpartitioned", partitioned_by=None)
    # one file of two days (one task writes it); the statement's parameters written in by sqlglot:
    # Iceberg's parser drops Spark's bound ones from a query (spark.adapter.SparkConnection.sql)
    binds = {"window_start": DAY, "window_end": NEXT + timedelta(days=1), "policy_version": "v1"}
    spark.sql(inline_params(f"SELECT p.* FROM ({SPARSE}) p", binds)).coalesce(1).writeTo(table).append()
    spark.sql(f"REFRESH TABLE {table}")
    assert spark.sql(f"SELECT count(*) FROM {table}.files").collect()[0][0] == 1
    adapter = SparkAdapter(SparkEngine("sc://unused"))
    assert adapter.describe(SparkConnection(spark, "test"), table).partitioning == ()
    before, first = all_days(spark, table), head(spark, table)
    with pytest.raises(SchemaError, match=r"window 2026-08-25 of ice\.idem\.payouts_unpartitioned") as err:
        operator(spark_conn, table, sql=SPARSE, parameters={"policy_version": "v2"}).execute(context(DAY))
    for named in ("nothing (an unpartitioned table)", "Nothing was committed", "MergeOperator", ".parquet"):
        assert named in str(err.value)
    assert head(spark, table) == first
    assert all_days(spark, table) == before == sparse_truth(DAY, NEXT + timedelta(days=1))
    merged = merge_operator(
        spark_conn, table, sql=SPARSE, parameters={"policy_version": "v2"}, delete_missing=True
    ).execute(context(DAY))
    assert (
        int(snapshots(spark, table)[-1]["parent_id"])
        == first
        == int(snapshots(spark, table)[-2]["snapshot_id"])
    )
    assert all_days(spark, table) == {DAY: sparse_truth(DAY, NEXT, "v2")[DAY], NEXT: before[NEXT]}
    assert merged["checksum"] == checksum_at(spark, table, merged["table_version"], DAY, NEXT)


@pytest.mark.parametrize(
    ("fields", "start", "end", "verdict"),
    [
        (("sale_date",), date(2026, 8, 25), date(2026, 8, 26), "fits"),
        (("months(sale_date)",), date(2026, 8, 1), date(2026, 9, 1), "fits"),
        (("months(sale_date)",), date(2026, 8, 25), date(2026, 8, 26), "cuts"),
        (("years(sale_date)",), date(2026, 1, 1), date(2026, 2, 1), "cuts"),
        (("years(sale_date)",), date(2026, 1, 1), date(2027, 1, 1), "fits"),
        (("bucket(4, sale_id)", "days(sale_date)"), date(2026, 8, 25), date(2026, 8, 26), "fits"),
        (("days(ts)",), datetime(2026, 8, 25, tzinfo=UTC), datetime(2026, 8, 26, tzinfo=UTC), "fits"),
        # midnight in Paris is 22:00 UTC: Iceberg's days() of a timestamp with a zone are UTC days
        (("days(ts)",), datetime(2026, 8, 25, tzinfo=PARIS), datetime(2026, 8, 26, tzinfo=PARIS), "cuts"),
        (("hours(ts)",), datetime(2026, 8, 25, 22), datetime(2026, 8, 25, 23), "fits"),
        (("days(ts)",), datetime(2026, 8, 25, 22), datetime(2026, 8, 25, 23), "cuts"),
        (("hours(ts)",), datetime(2026, 8, 25, 22, 30), datetime(2026, 8, 25, 23), "cuts"),
        # 02:00 in Paris is midnight UTC: a whole UTC day
        (
            ("days(ts)",),
            datetime(2026, 8, 25, 2, tzinfo=PARIS),
            datetime(2026, 8, 26, 2, tzinfo=PARIS),
            "fits",
        ),
        (("bucket(4, sale_id)",), date(2026, 8, 25), date(2026, 8, 26), "unknown"),
        (("truncate(10, sale_date)",), date(2026, 8, 25), date(2026, 8, 26), "unknown"),
        ((), date(2026, 8, 25), date(2026, 8, 26), "unknown"),
    ],
)
def test_window_fit_by_partitioning(fields, start, end, verdict) -> None:
    """Which windows one Iceberg overwrite can replace, by the partition fields (no cluster)."""
    column = "ts" if isinstance(start, datetime) else "sale_date"
    assert window_fit(fields, column, start, end).verdict == verdict


@pytest.mark.parametrize(
    ("rows", "fields"),
    [
        # DESCRIBE TABLE EXTENDED's rows as Spark 4.1.4 with Iceberg 1.11.0 returned them (abridged)
        (
            [
                ("id", "bigint"),
                ("d", "date"),
                ("# Partition Information", ""),
                ("# col_name", "data_type"),
                ("d", "date"),
                ("", ""),
                ("# Metadata Columns", ""),
                ("_spec_id", "int"),
                ("Name", "ice.x.t"),
            ],
            ("d",),
        ),
        (
            [
                ("id", "bigint"),
                ("d", "date"),
                ("", ""),
                ("# Partitioning", ""),
                ("Part 0", "months(d)"),
                ("Part 1", "bucket(4, id)"),
                ("", ""),
                ("# Metadata Columns", ""),
                ("_pos", "bigint"),
            ],
            ("months(d)", "bucket(4, id)"),
        ),
        ([("id", "bigint"), ("", ""), ("# Metadata Columns", ""), ("_partition", "struct<>")], ()),
    ],
    ids=["identity", "transforms", "unpartitioned"],
)
def test_partition_fields_from_describe(rows, fields) -> None:
    assert partition_fields(rows) == fields

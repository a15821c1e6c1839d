"""The operators on Delta Lake tables, on the session's cluster (its Connect server loads Delta).

Every expected figure comes from the payouts scenario's formula in pure Python
(payouts_spark.day_truth) or from SQL written here by hand, never from the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest

from airflow_idempotent.errors import MergeKeyError, RowsOutsideWindowError
from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.spark import steps
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


def create_delta_payouts(spark: Any, table: str) -> None:
    create_payouts(spark, table, using="delta")


def version(spark: Any, table: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["version"])


def commit(spark: Any, table: str, at: int) -> Any:
    rows = spark.sql(f"DESCRIBE HISTORY {table}").collect()
    return next(r for r in rows if int(r["version"]) == at)


@pytest.fixture(scope="module")
def merged_day(spark_conn: str) -> Iterator[Callable[[Any], str]]:
    """A Delta payouts table holding DAY as the provider's MERGE wrote it, built once (with the
    first test's client) and shared by the refusal cases: each asserts that its refused write
    left the version and the rows as they were, so the next starts from the same table."""
    made: list[str] = []

    def get(spark: Any) -> str:
        if not made:
            table = "delta_merge_refusals"
            create_delta_payouts(spark, table)
            merge_operator(spark_conn, table).execute(context(DAY))
            made.append(table)
        return made[0]

    yield get


def test_payouts_crash_then_three_reruns_on_delta(spark, spark_conn) -> None:
    """Crash after 1,247 rows, three reruns: 2,000 rows / 299,730.00, neighbours untouched, each
    rerun one commit whose version, count and checksum the result and history carry."""
    table = "delta_payouts_crash"
    create_delta_payouts(spark, table)
    before, after = DAY - timedelta(days=1), DAY + timedelta(days=1)
    for day in (before, after):
        operator(spark_conn, table).execute(context(day))
    neighbours = {d: day_figures(spark, table, d) for d in (before, after)}
    simulate_crash(spark, table, DAY, rows=1247)
    assert day_figures(spark, table, DAY) == (1247, 1247, Decimal("187015.80"))
    first = version(spark, table)
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
    # one commit per rerun, each a WRITE tagged with the attempt, and the version in the result
    assert [r["table_version"] for r in results] == [first + 1, first + 2, first + 3]
    assert version(spark, table) == first + 3
    for r in results:
        c = commit(spark, table, r["table_version"])
        assert c["operation"] == "WRITE"
        assert json.loads(c["userMetadata"])["airflow_idempotent"]["window"] == "2026-08-25"
        assert r["checksum"] == checksum_at(spark, table, r["table_version"], DAY, DAY + timedelta(days=1))
    assert len({r["checksum"] for r in results}) == 1
    assert [r.get("ordinal") for r in results] == [1, 2, 3]


def test_checksum_is_read_at_the_commits_version_not_later(spark, spark_conn) -> None:
    """A later commit to the window changes the table, not what the write recorded."""
    table = "delta_payouts_version"
    create_delta_payouts(spark, table)
    result = operator(spark_conn, table).execute(context(DAY))
    at = result["table_version"]
    spark.sql(f"DELETE FROM {table} WHERE sale_id % 2 = 0")
    assert day_figures(spark, table, DAY)[0] == 1000
    assert result["checksum"] == checksum_at(spark, table, at, DAY, DAY + timedelta(days=1))
    assert result["checksum"].startswith("v2:2000:")
    assert checksum_at(spark, table, at + 1, DAY, DAY + timedelta(days=1)).startswith("v2:1000:")


def test_empty_window_is_emptied_in_one_commit(spark, spark_conn) -> None:
    table = "delta_payouts_empty"
    create_delta_payouts(spark, table)
    empty_day = START + timedelta(days=DAYS + 5)  # no sales that day: the SELECT returns nothing
    spark.sql(
        f"INSERT INTO {table} VALUES (1, 1.00, 0.60, DATE'{empty_day}'), (2, 2.00, 0.60, DATE'{empty_day}')"
    )
    operator(spark_conn, table).execute(context(DAY))
    first = version(spark, table)
    result = operator(spark_conn, table).execute(context(empty_day))
    assert (result["rows_deleted"], result["rows_inserted"], result["row_count"]) == (2, 0, 0)
    assert result["table_version"] == first + 1 == version(spark, table)
    assert day_figures(spark, table, empty_day) == (0, 0, Decimal("0"))
    assert day_figures(spark, table, DAY)[::2] == day_truth(DAY)


def test_month_is_replaced_whole(spark, spark_conn) -> None:
    """A month over daily partitions in one commit: a stale day the SELECT no longer has goes too,
    the months around it stay."""
    table = "delta_payouts_month"
    create_delta_payouts(spark, table)
    insert_month(spark, table, policy="v1")
    stale = date(2026, 8, 31)  # in the month, but the sales end on 2026-08-30
    july, september = date(2026, 7, 31), date(2026, 9, 1)
    spark.sql(
        f"INSERT INTO {table} VALUES (900001, 9.99, 0.60, DATE'{stale}'), "
        f"(900002, 1.00, 0.60, DATE'{july}'), (900003, 2.00, 0.60, DATE'{september}')"
    )
    first = version(spark, table)
    result = operator(spark_conn, table, granularity="month", parameters={"policy_version": "v2"}).execute(
        context(START)
    )
    assert result["table_version"] == first + 1 == version(spark, table)
    assert (result["rows_deleted"], result["rows_inserted"]) == (DAYS * 2000 + 1, DAYS * 2000)
    days = all_days(spark, table)
    for offset in range(DAYS):
        day = START + timedelta(days=offset)
        assert days[day] == day_truth(day, "v2")
    assert stale not in days
    assert days[july] == (1, Decimal("1.00")) and days[september] == (1, Decimal("2.00"))


@pytest.mark.parametrize("make", [operator, merge_operator], ids=["overwrite", "merge"])
def test_rows_outside_the_window_are_refused_with_nothing_committed(
    spark, spark_conn, merged_day, make
) -> None:
    if make is merge_operator:  # the merge cases' shared table (DAY merged)
        table = merged_day(spark)
    else:
        table = f"delta_payouts_outside_{make.__name__}"
        create_delta_payouts(spark, table)
        make(spark_conn, table).execute(context(DAY))
    before, first = all_days(spark, table), version(spark, table)
    leaky = PAYOUT_SQL.replace("s.sale_date < :window_end", "s.sale_date <= :window_end")
    with pytest.raises(
        RowsOutsideWindowError, match=r"2000 row\(s\) whose sale_date is outside .* 2026-08-26.*nothing"
    ):
        make(spark_conn, table, sql=leaky).execute(context(DAY))
    assert version(spark, table) == first
    assert all_days(spark, table) == before == {DAY: day_truth(DAY)}


def test_merge_payouts_crash_then_three_reruns(spark, spark_conn) -> None:
    table = "delta_merge_crash"
    create_delta_payouts(spark, table)
    after = DAY + timedelta(days=1)
    merge_operator(spark_conn, table).execute(context(after))
    neighbour = day_figures(spark, table, after)
    simulate_crash(spark, table, DAY, rows=1247)
    first = version(spark, table)
    results = [merge_operator(spark_conn, table).execute(context(DAY)) for _ in range(3)]
    assert day_figures(spark, table, DAY) == (2000, 2000, Decimal("299730.00"))
    assert day_figures(spark, table, after) == neighbour
    assert neighbour[::2] == day_truth(after)
    assert [(r["rows_inserted"], r["rows_updated"], r["source_rows"]) for r in results] == [
        (753, 1247, 2000),
        (0, 2000, 2000),
        (0, 2000, 2000),
    ]
    assert [r["table_version"] for r in results] == [first + 1, first + 2, first + 3]
    assert commit(spark, table, first + 1)["operation"] == "MERGE"
    for r in results:
        assert r["checksum"] == checksum_at(spark, table, r["table_version"], DAY, DAY + timedelta(days=1))


@pytest.mark.parametrize("point", ["prepared", "committed"])
def test_merge_counts_its_own_commit_when_another_lands_around_it(spark, spark_conn, point) -> None:
    """Another commit to the window before the MERGE (its likely version then taken) or right
    after it (the table's newest version then not the MERGE's): the result's count and checksum
    are still the MERGE commit's, read at its version by SQL written here, not the later state."""
    table = f"delta_merge_meddled_{point}"
    create_delta_payouts(spark, table)
    simulate_crash(spark, table, DAY, rows=1247)

    def hook(step: str) -> None:
        if step == point:  # a row of another sale into the window, one commit
            spark.sql(f"INSERT INTO {table} VALUES (990001, 1.00, 0.60, DATE'{DAY}')")

    steps.step_hook = hook
    try:
        result = merge_operator(spark_conn, table).execute(context(DAY))
    finally:
        steps.step_hook = None
    at = result["table_version"]
    merged = commit(spark, table, at)
    assert merged["operation"] == "MERGE"
    assert json.loads(merged["userMetadata"])["airflow_idempotent"]["window"] == "2026-08-25"
    end = DAY + timedelta(days=1)
    rows = 2001 if point == "prepared" else 2000  # the inserted row in the MERGE's version or not
    expected = checksum_at(spark, table, at, DAY, end)
    assert expected.startswith(f"v2:{rows}:")
    assert (result["row_count"], result["checksum"]) == (rows, expected)
    if point == "committed":  # the row came after: the table's newest version is not the MERGE's
        assert version(spark, table) == at + 1
        assert day_figures(spark, table, DAY)[0] == 2001
        assert checksum_at(spark, table, at + 1, DAY, end) != expected
    else:
        assert version(spark, table) == at


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
def test_merge_refuses_repeated_and_null_keys_with_nothing_written(
    spark, spark_conn, merged_day, extra, named
) -> None:
    table = merged_day(spark)  # DAY merged
    before, first = all_days(spark, table), version(spark, table)
    assert (DAY - START).days * 2000 + 1 == 48001  # the day's first sale, repeated by `extra`
    with pytest.raises(MergeKeyError, match=r"nothing was written") as err:
        merge_operator(
            spark_conn, table, sql=f"{PAYOUT_SQL} {extra}", parameters={"policy_version": "v2"}
        ).execute(context(DAY))
    assert named in str(err.value)
    assert version(spark, table) == first
    assert all_days(spark, table) == before == {DAY: day_truth(DAY)}


def test_merge_delete_missing_deletes_only_the_windows_missing_rows(spark, spark_conn) -> None:
    table = "delta_merge_delete_missing"
    create_delta_payouts(spark, table)
    after = DAY + timedelta(days=1)
    for day in (DAY, after):
        merge_operator(spark_conn, table).execute(context(day))
    fewer = PAYOUT_SQL + " AND s.sale_id % 10 <> 0"
    kept = merge_operator(spark_conn, table, sql=fewer).execute(context(DAY))
    assert day_figures(spark, table, DAY)[0] == 2000  # without delete_missing nothing goes
    assert kept["rows_deleted"] == 0
    result = merge_operator(spark_conn, table, sql=fewer, delete_missing=True).execute(context(DAY))
    first = (DAY - START).days * 2000 + 1
    ids = [i for i in range(first, first + 2000) if i % 10]
    assert day_figures(spark, table, DAY) == (1800, 1800, sum((amount(i) for i in ids), Decimal("0")))
    assert (result["rows_deleted"], result["rows_inserted"], result["row_count"]) == (200, 0, 1800)
    assert day_figures(spark, table, after)[::2] == day_truth(after)  # the next day keeps its 10s


def test_merge_never_moves_a_row_out_of_another_window(spark, spark_conn) -> None:
    table = "delta_merge_move"
    create_delta_payouts(spark, table)
    after = DAY + timedelta(days=1)
    merge_operator(spark_conn, table).execute(context(after))
    moved = (DAY - START).days * 2000 + 7  # a sale of DAY, held by the table on the next day
    spark.sql(f"INSERT INTO {table} VALUES ({moved}, 1.00, 0.60, DATE'{after}')")
    before, first = all_days(spark, table), version(spark, table)
    with pytest.raises(MergeKeyError, match=rf"already holds outside the window .*{moved}"):
        merge_operator(spark_conn, table).execute(context(DAY))
    assert version(spark, table) == first
    assert all_days(spark, table) == before


def test_merge_names_repeated_keys_before_keys_held_in_another_window(spark, spark_conn) -> None:
    """Both checks run as one Spark query; the refusals keep their order: a repeated key is named
    first, and the keys held outside the window are named (up to ten) once the keys are unique."""
    table = "delta_merge_both"
    create_delta_payouts(spark, table)
    after = DAY + timedelta(days=1)
    merge_operator(spark_conn, table).execute(context(after))
    first_sale = (DAY - START).days * 2000 + 1
    moved = list(range(first_sale + 100, first_sale + 112))  # 12 sales of DAY held on the next day
    rows = ", ".join(f"({i}, 1.00, 0.60, DATE'{after}')" for i in moved)
    spark.sql(f"INSERT INTO {table} VALUES {rows}")
    before, head = all_days(spark, table), version(spark, table)
    extra = f"SELECT sale_id, sale_date, 1.00, 0.60 FROM sales WHERE sale_id = {first_sale}"
    repeated = f"{PAYOUT_SQL} UNION ALL {extra}"
    with pytest.raises(MergeKeyError, match=rf"duplicate key\(s\) {first_sale} \(2 rows\) on") as err:
        merge_operator(spark_conn, table, sql=repeated, parameters={"policy_version": "v2"}).execute(
            context(DAY)
        )
    assert "already holds" not in str(err.value)
    with pytest.raises(MergeKeyError, match=r"already holds outside the window") as err:
        merge_operator(spark_conn, table).execute(context(DAY))
    named = [f"{i} (sale_date {after})" for i in moved]
    assert ", ".join(named[:10]) in str(err.value) and named[10] not in str(err.value)
    assert version(spark, table) == head
    assert all_days(spark, table) == before


def test_every_provider_session_has_replace_where_row_check_set_once(spark_conn, spark_cluster) -> None:
    """REPLACE WHERE's row check is set on each session the provider opens (`open_session`), so a
    Delta overwrite relies on it without a round trip of its own: the session's explicitly set
    confs hold it. A session opened without the provider's setup holds no such entry (the check's
    default is not what is read here)."""
    from pyspark.sql import SparkSession

    from airflow_idempotent.spark.adapter import CONSTRAINT_CHECK, SparkAdapter

    with SparkAdapter.from_connection(spark_conn).engine.connect() as conn:
        assert conn.session.conf.getAll.get(CONSTRAINT_CHECK) == "true"
    bare = SparkSession.builder.remote(spark_cluster.connect_url).create()
    bare.client.disable_reattachable_execute()
    try:
        assert CONSTRAINT_CHECK not in bare.conf.getAll
    finally:
        bare.stop()

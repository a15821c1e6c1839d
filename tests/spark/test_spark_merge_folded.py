"""The merge's refusals folded into the MERGE (`spark.merges.folded_source`), on Delta and Iceberg.

A repeated key, a NULL key, a row outside the window and a key the table holds outside the window
each fail the MERGE itself in the cluster (its failure carries `merges.REFUSED`, the cause of the
named error), with nothing committed: the table's version or snapshot, its rows and the provider's
history as before, each read here independently. Clean merges (a whole new window, an update of
it, an insert-only MERGE whose columns are all keys) count what the payouts formula says.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from airflow_idempotent.errors import MergeKeyError, RowsOutsideWindowError
from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.operators import MergeOperator
from airflow_idempotent.spark.cluster import ICEBERG_CATALOG
from airflow_idempotent.spark.merges import REFUSED
from tests.spark.payouts_spark import DAY, START, all_days, context, create_payouts, day_figures, day_truth

#: Reads a table's current version (Delta) or snapshot (Iceberg) with the test's client.
Head = Callable[[], int]

pytestmark = pytest.mark.spark

NEXT = DAY + timedelta(days=1)
FIRST_SALE = (DAY - START).days * 2000 + 1  # DAY's first sale (48001)
NEXT_SALE = FIRST_SALE + 2000  # the first sale of the next day
#: Each refused source: what is added to the payouts SELECT (or None: a key of DAY held on NEXT),
#: the error and the text naming the refused key or rows.
REFUSALS: dict[str, tuple[str | None, type[Exception], str]] = {
    "repeated": (
        f"UNION ALL SELECT sale_id, sale_date, 1.00, 0.60 FROM sales WHERE sale_id = {FIRST_SALE}",
        MergeKeyError,
        rf"duplicate key\(s\) {FIRST_SALE} \(2 rows\)",
    ),
    "null": (
        f"UNION ALL SELECT CAST(NULL AS BIGINT), DATE'{DAY}', 1.00, 0.60",
        MergeKeyError,
        r"NULL key\(s\) None \(1 rows\)",
    ),
    "outside": (
        f"UNION ALL SELECT sale_id, sale_date, 1.00, 0.60 FROM sales WHERE sale_id = {NEXT_SALE}",
        RowsOutsideWindowError,
        rf"1 row\(s\) whose sale_date is outside the window {DAY}",
    ),
    "held": (
        None,
        MergeKeyError,
        rf"already holds outside the window .*{FIRST_SALE + 6} \(sale_date {NEXT}\)",
    ),
}


def delta_version(spark: Any, table: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["version"])


def iceberg_head(spark: Any, table: str) -> int:
    spark.sql(f"REFRESH TABLE {table}")
    return int(
        spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()[0]["snapshot_id"]
    )


def head_of(spark: Any, fmt: str, table: str) -> Head:
    """How `table`'s current version (Delta) or snapshot (Iceberg) is read, by SQL written here."""
    if fmt == "iceberg":
        return lambda: iceberg_head(spark, table)
    return lambda: delta_version(spark, table)


def payouts(spark: Any, fmt: str, name: str) -> tuple[str, Head]:
    """An empty payouts table of format `fmt`, and how its current version (Delta) or snapshot
    (Iceberg) is read."""
    if fmt == "iceberg":
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.idem")
        table = f"{ICEBERG_CATALOG}.idem.folded_{name}"
        create_payouts(spark, table, using="iceberg")
    else:
        table = f"delta_folded_{name}"
        create_payouts(spark, table, using="delta")
    return table, head_of(spark, fmt, table)


#: Builds (once per module, then shared) a payouts table holding DAY and NEXT as the provider's
#: MERGE wrote them: (test's client, format, source table) -> the table's name.
TwoDays = Callable[[Any, str, str], str]


@pytest.fixture(scope="module")
def two_days(spark_conn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoDays]:
    """The refusal cases' starting table, one per format and source, shared: a refused MERGE
    commits nothing (each case asserts the version, rows and history unchanged), so the next
    case starts from the same table; the one case that adds a row deletes it again. Its two
    setup MERGEs are recorded in a history store of their own, not in the case's."""
    made: dict[tuple[str, str], str] = {}
    store = tmp_path_factory.mktemp("folded_history") / "history.db"

    def get(spark: Any, fmt: str, source: str = "sales") -> str:
        if (fmt, source) not in made:
            sql = PAYOUT_SQL.replace("FROM sales s", f"FROM {source} s")
            table, _ = payouts(spark, fmt, "shared" if source == "sales" else f"{source}_shared")
            with pytest.MonkeyPatch.context() as mp:
                conn = json.dumps({"conn_type": "sqlite", "host": str(store)})
                mp.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", conn)
                for day in (DAY, NEXT):
                    merging(spark_conn, table, sql=sql).execute(context(day))
            made[(fmt, source)] = table
        return made[(fmt, source)]

    yield get


@contextlib.contextmanager
def held_row(spark: Any, table: str) -> Iterator[None]:
    """A sale of DAY also held on NEXT (the `held` case's table), deleted again afterwards."""
    spark.sql(f"INSERT INTO {table} VALUES ({FIRST_SALE + 6}, 1.00, 0.60, DATE'{NEXT}')")
    try:
        yield
    finally:
        spark.sql(f"DELETE FROM {table} WHERE sale_id = {FIRST_SALE + 6} AND sale_date = DATE'{NEXT}'")


def merging(
    conn_id: str, table: str, sql: str = PAYOUT_SQL, policy: str = "v1", **kwargs: Any
) -> MergeOperator:
    options: dict[str, Any] = {
        "task_id": f"merge_{table.replace('.', '_')}",
        "conn_id": conn_id,
        "table": table,
        "partition_column": "sale_date",
        "sql": sql,
        "parameters": {"policy_version": policy},
        "granularity": "day",
        "emit_asset": False,
        "key_columns": ["sale_id"],
    }
    options.update(kwargs)
    return MergeOperator(**options)


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_source_fails_the_merge_with_nothing_committed(
    spark, spark_conn, history, two_days: TwoDays, fmt, case
) -> None:
    extra, error, named = REFUSALS[case]
    table = two_days(spark, fmt, "sales")
    head = head_of(spark, fmt, table)
    sql = f"{PAYOUT_SQL} {extra}"
    with held_row(spark, table) if extra is None else contextlib.nullcontext():
        if extra is None:  # a sale of DAY the table also holds on NEXT
            sql = PAYOUT_SQL
        before, version = all_days(spark, table), head()
        written = len(history.writes(target=f"{spark_conn}:{table}"))
        assert before[DAY] == day_truth(DAY) and before[NEXT][0] == day_truth(NEXT)[0] + (extra is None)
        with pytest.raises(error, match=named) as err:
            merging(spark_conn, table, sql=sql, policy="v2").execute(context(DAY))
        assert "nothing was written" in str(err.value)
        assert REFUSED in str(err.value.__context__)  # the MERGE itself refused the row, in the cluster
        assert head() == version
        assert all_days(spark, table) == before
        assert len(history.writes(target=f"{spark_conn}:{table}")) == written  # no committed write recorded


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_clean_merges_count_what_the_formula_says(spark, spark_conn, history, fmt) -> None:
    """A whole new window (every row inserted), then its update under another policy, then an
    insert-only MERGE (every column a key: no UPDATE clause) of a new window."""
    table, head = payouts(spark, fmt, "clean")
    merging(spark_conn, table).execute(context(NEXT))
    new = merging(spark_conn, table).execute(context(DAY))
    assert (new["rows_inserted"], new["rows_updated"], new["source_rows"]) == (2000, 0, 2000)
    assert day_figures(spark, table, DAY)[::2] == day_truth(DAY)
    updated = merging(spark_conn, table, policy="v2").execute(context(DAY))
    assert (updated["rows_inserted"], updated["rows_updated"], updated["row_count"]) == (0, 2000, 2000)
    assert day_figures(spark, table, DAY)[::2] == day_truth(DAY, "v2")
    assert day_figures(spark, table, NEXT)[::2] == day_truth(NEXT)
    assert updated["table_version"] == head()
    later = NEXT + timedelta(days=1)
    every = ["sale_id", "sale_date", "amount_eur", "rate"]
    inserted = merging(spark_conn, table, key_columns=every).execute(context(later))
    assert (inserted["rows_inserted"], inserted["rows_updated"], inserted["row_count"]) == (2000, 0, 2000)
    assert day_figures(spark, table, later)[::2] == day_truth(later)
    assert len(history.writes(target=f"{spark_conn}:{table}")) == 4


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_insert_only_merge_refuses_a_repeated_key_with_nothing_committed(spark, spark_conn, fmt) -> None:
    """Every column a key: Delta's insert-only MERGE (no UPDATE clause), into a window the table
    does not hold yet; the repeated row still fails it."""
    table, head = payouts(spark, fmt, "insert_only")
    merging(spark_conn, table).execute(context(NEXT))
    before, version = all_days(spark, table), head()
    extra = f"UNION ALL SELECT sale_id, sale_date, 1.00, 0.60 FROM sales WHERE sale_id = {FIRST_SALE}"
    every = ["sale_id", "sale_date", "amount_eur", "rate"]
    with pytest.raises(MergeKeyError, match=r"duplicate key\(s\)") as err:
        merging(spark_conn, table, sql=f"{PAYOUT_SQL} {extra} {extra}", key_columns=every).execute(
            context(DAY)
        )
    assert REFUSED in str(err.value.__context__)
    assert head() == version
    assert all_days(spark, table) == before == {NEXT: day_truth(NEXT)}


@pytest.mark.parametrize("case", ["repeated", "held"])
def test_delta_source_of_delta_tables_only_refuses_with_nothing_committed(
    spark, spark_conn, two_days: TwoDays, case
) -> None:
    """A source reading Delta tables only is not materialized by Delta's MERGE (its
    ``merge.materializeSource=auto``; a parquet read, as the other tests', is): the MERGE reads it
    twice, to find the files it touches and to write. The count per key is deterministic, so both
    reads refuse the same row, and nothing is committed."""
    spark.sql("CREATE TABLE IF NOT EXISTS delta_sales USING delta AS SELECT * FROM sales")
    sql = PAYOUT_SQL.replace("FROM sales s", "FROM delta_sales s")
    assert sql != PAYOUT_SQL
    table = two_days(spark, "delta", "delta_sales")
    head = head_of(spark, "delta", table)
    extra, error, named = REFUSALS[case]
    if extra is not None:
        sql = f"{sql} {extra.replace('FROM sales', 'FROM delta_sales')}"
    with held_row(spark, table) if extra is None else contextlib.nullcontext():
        before, version = all_days(spark, table), head()
        assert before[DAY] == day_truth(DAY) and before[NEXT][0] == day_truth(NEXT)[0] + (extra is None)
        with pytest.raises(error, match=named) as err:
            merging(spark_conn, table, sql=sql, policy="v2").execute(context(DAY))
        assert REFUSED in str(err.value.__context__)
        assert head() == version
        assert all_days(spark, table) == before

"""A merge skips counting its source's distinct and NULL keys only when the SELECT's shape proves them.

`unique_source.keys_provably_unique`: one table read, no join, union, grouping or row-multiplying
function, and the merge keys projected as that table's NOT NULL unique key (its primary key). The
statements the database ran are counted by a SQLAlchemy event listener; every other shape still
refuses a repeated or NULL key on every engine, naming it, with nothing written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.adapters.unique_source import key_columns_of, source_table
from airflow_idempotent.errors import MergeKeyError
from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.lint import check_deterministic
from tests.test_merge_keys import loaded  # noqa: F401  (the fixture: sales, payouts and a crash)
from tests.test_operators import context, make, payouts_snapshot

#: Where the source pass counts the keys today (`key_check` "counts"): the other engines' upserts
#: refuse or reveal repeated keys themselves and never count them in a pass.
COUNTS_KEYS = {"postgres": False, "mariadb": True, "sqlite": True, "duckdb": False}


@contextmanager
def statements() -> Iterator[list[str]]:
    """Every statement any engine runs inside the block, as sent to the driver."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(" ".join(statement.split()).upper())

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)


def key_counts(seen: list[str]) -> list[str]:
    """The source passes that count distinct keys (`source_profile` with keys)."""
    return [s for s in seen if "COUNT(DISTINCT" in s and "_IDEM_SRC" in s]


# --- the shape, without a database --------------------------------------------------------------


@pytest.mark.parametrize(
    "sql, keys, columns",
    [
        (PAYOUT_SQL, ["sale_id"], {"sale_id"}),
        ("SELECT x.id AS sale_id, x.d FROM sales AS x WHERE x.d > :a LIMIT 5", ["sale_id"], {"id"}),
        ("SELECT a, b FROM shop.t", ["b", "a"], {"a", "b"}),
    ],
)
def test_a_single_table_select_of_plain_key_columns_has_a_shape_that_can_prove_them(
    sql: str, keys: list[str], columns: set[str]
) -> None:
    query = check_deterministic(sql, "mysql")
    found = source_table(query)
    assert found is not None
    assert key_columns_of(query, found[1], keys) == frozenset(columns)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT s.k FROM sales AS s JOIN other AS o ON o.k = s.k",  # a join repeats a row per match
        "SELECT s.k FROM sales AS s, other AS o",
        "SELECT k FROM sales UNION ALL SELECT k FROM sales",
        "SELECT k FROM sales GROUP BY k",
        "SELECT DISTINCT k FROM sales",
        "WITH sales AS (SELECT 1 AS k UNION ALL SELECT 1) SELECT k FROM sales",  # a CTE shadows it
        "SELECT k, my_function(k) AS v FROM sales",  # a function sqlglot does not know
        "SELECT k FROM (SELECT k FROM sales) AS s",  # a derived table
    ],
)
def test_any_other_shape_keeps_the_count(sql: str) -> None:
    assert source_table(check_deterministic(sql, "postgres")) is None


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT k + 0 AS k FROM sales",  # an expression of the key
        "SELECT o.k FROM sales",  # another table's column
        "SELECT j AS k FROM sales",  # fine, but `k` is not projected as the key below
    ],
)
def test_a_key_that_is_not_a_plain_column_of_the_table_keeps_the_count(sql: str) -> None:
    query = check_deterministic(sql, "postgres")
    found = source_table(query)
    assert found is not None
    keys = ["k"] if "j AS" not in sql else ["k", "j"]
    assert key_columns_of(query, found[1], keys) is None  # type: ignore[arg-type]


# --- on every engine ----------------------------------------------------------------------------


@pytest.mark.usefixtures("loaded")
def test_a_select_of_the_sources_primary_key_runs_no_key_count(warehouse: Any) -> None:
    """PAYOUT_SQL reads sales alone and projects its primary key sale_id as the merge key: no
    COUNT(DISTINCT) runs; the counts are right (1,247 of the crash updated, 753 inserted). On
    MariaDB it is the pass that skips it; PostgreSQL and DuckDB never count keys in a pass."""
    with statements() as seen:
        result = make("merge", delete_missing=False).execute(context())
    assert (result["rows_inserted"], result["rows_updated"], result["source_rows"]) == (753, 1247, 2000)
    # SQLite lets a PRIMARY KEY column other than INTEGER hold NULLs: not a proof, the count runs
    assert bool(key_counts(seen)) is (warehouse.kind == "sqlite")
    if COUNTS_KEYS[warehouse.kind]:  # the source pass still counts rows and the window
        assert any("_IDEM_SRC" in s and "COUNT(*)" in s and s.startswith("SELECT") for s in seen)


def refused(warehouse: Any, sql: str, match: str, **kwargs: Any) -> list[str]:
    """A merge of `sql` refused with `match`, payouts unchanged; the statements it ran."""
    before = payouts_snapshot(warehouse.engine)
    with statements() as seen, pytest.raises(MergeKeyError, match=match):
        make("merge", sql=sql, **kwargs).execute(context())
    assert payouts_snapshot(warehouse.engine) == before
    return seen


@pytest.mark.usefixtures("loaded")
def test_a_join_that_repeats_a_key_is_refused_and_named(warehouse: Any) -> None:
    """The source table's key is unique, but a join repeats sale 48001: the count runs and refuses."""
    sql = PAYOUT_SQL.replace(
        "FROM sales s WHERE",
        "FROM sales s JOIN (SELECT 1 AS n UNION ALL SELECT 2 AS n) d ON d.n = 1 OR s.sale_id = 48001 WHERE",
    )
    seen = refused(warehouse, sql, r"duplicate key\(s\) 48001 \(2 rows\)")
    assert bool(key_counts(seen)) is COUNTS_KEYS[warehouse.kind]


def copy_of_sales(engine: sa.Engine, name: str, sale_id: str, *then: str) -> str:
    """A copy of sales named `name`, its sale_id column declared `sale_id`, then the statements
    `then`; PAYOUT_SQL reading it instead of sales."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"CREATE TABLE {name} (sale_id {sale_id}, sale_date DATE NOT NULL, "
                "price_eur DECIMAL(10,2) NOT NULL)"
            )
        )
        conn.execute(sa.text(f"INSERT INTO {name} SELECT sale_id, sale_date, price_eur FROM sales"))
        for statement in then:
            conn.execute(sa.text(statement))
    return PAYOUT_SQL.replace("FROM sales s", f"FROM {name} s")


@pytest.mark.usefixtures("loaded")
def test_a_key_that_is_not_the_sources_key_is_refused_and_named(warehouse: Any) -> None:
    """A source table without a key on the merge key column (sale_id repeated in it)."""
    again = "INSERT INTO sales_copy SELECT sale_id, sale_date, price_eur FROM sales WHERE sale_id = 49999"
    sql = copy_of_sales(warehouse.engine, "sales_copy", "BIGINT NOT NULL", again)
    seen = refused(warehouse, sql, r"duplicate key\(s\) 49999")
    assert bool(key_counts(seen)) is COUNTS_KEYS[warehouse.kind]


@pytest.mark.usefixtures("loaded")
def test_a_unique_key_on_a_nullable_column_does_not_prove_the_keys(warehouse: Any) -> None:
    """A unique index takes NULLs: a source keyed by a nullable unique column still has its NULL
    keys counted and named."""
    sql = copy_of_sales(
        warehouse.engine,
        "sales_nk",
        "BIGINT",
        "CREATE UNIQUE INDEX sales_nk_id ON sales_nk (sale_id)",
        "UPDATE sales_nk SET sale_id = NULL WHERE sale_id = 49990",
    )
    adapter = adapter_for(warehouse.engine)
    with warehouse.engine.connect() as conn:
        assert adapter.source_unique_keys(conn, "sales_nk") == []
        # SQLite's BIGINT PRIMARY KEY takes NULLs (only INTEGER PRIMARY KEY is NOT NULL there)
        assert adapter.source_unique_keys(conn, "sales") == (
            [] if warehouse.kind == "sqlite" else [frozenset({"sale_id"})]
        )
    seen = refused(warehouse, sql, r"NULL key\(s\) None")
    assert bool(key_counts(seen)) is COUNTS_KEYS[warehouse.kind]

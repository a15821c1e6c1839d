"""How a merge finds repeated or NULL source keys on each engine, and that the flags tell the truth.

The adapters declare what their native upsert guarantees (`upsert_refuses_repeated_keys`,
`upsert_counts_distinct_rows`, `counts_distinct_tuples`); `strategies.merge` trusts them to skip
the key pass. So each flag is proved here on the real engine, from a source whose answer is
known by construction, and every path still names the keys and leaves the table unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlglot import exp

from airflow_idempotent import strategies
from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.adapters.base import SOURCE_ALIAS
from airflow_idempotent.errors import MergeKeyError, RowsOutsideWindowError
from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payouts, create_sales, simulate_crash
from airflow_idempotent.lint import check_deterministic
from tests.test_operators import DAY, context, make, payouts_snapshot

#: What each engine's upsert does with one key twice in its source (measured, not assumed).
EXPECTED = {
    # ON CONFLICT DO UPDATE: "command cannot affect row a second time"
    "postgres": {"refuses": True, "counts_distinct": False, "tuples": True, "check": "statement"},
    # ON DUPLICATE KEY UPDATE updates the row its first occurrence inserted
    "mariadb": {"refuses": False, "counts_distinct": False, "tuples": True, "check": "counts"},
    # ON CONFLICT DO UPDATE updates the row a second time
    "sqlite": {"refuses": False, "counts_distinct": False, "tuples": False, "check": "counts"},
    # ON CONFLICT keeps one row per key and counts it once
    "duckdb": {"refuses": False, "counts_distinct": True, "tuples": True, "check": "rowcount"},
}

#: Three source rows, key 2 twice, against a target already holding key 1: two distinct keys.
SOURCE = "SELECT 2 AS k, 10 AS v UNION ALL SELECT 2 AS k, 20 AS v UNION ALL SELECT 3 AS k, 30 AS v"


def upsert_repeated(warehouse: Any) -> tuple[BaseException | None, int, list[tuple[int, int]]]:
    """Run the adapter's own upsert of SOURCE: the error it raised, else its row count, then the rows."""
    adapter = adapter_for(warehouse.engine)
    with warehouse.engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE idem_keys (k INTEGER NOT NULL PRIMARY KEY, v INTEGER)"))
        conn.execute(sa.text("INSERT INTO idem_keys (k, v) VALUES (1, 0)"))
    query = check_deterministic(SOURCE, adapter.dialect)
    error: BaseException | None = None
    count = -2
    try:
        with warehouse.engine.begin() as conn:
            result = adapter.execute(conn, adapter.upsert("idem_keys", ["k", "v"], ["k"], query), {})
            count = result.rowcount
    except sa.exc.DBAPIError as err:
        error = err
    with warehouse.engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(sa.text("SELECT k, v FROM idem_keys ORDER BY k")).all()]
    return error, count, rows  # type: ignore[return-value]


def test_each_engines_upsert_flag_is_what_its_upsert_does(warehouse: Any) -> None:
    adapter = adapter_for(warehouse.engine)
    expected = EXPECTED[warehouse.kind]
    assert adapter.upsert_refuses_repeated_keys is expected["refuses"]
    assert adapter.upsert_counts_distinct_rows is expected["counts_distinct"]
    error, count, rows = upsert_repeated(warehouse)
    if expected["refuses"]:
        assert error is not None and "second time" in str(error)
        assert rows == [(1, 0)]  # refused in the statement: nothing written
        return
    assert error is None
    assert [k for k, _ in rows] == [1, 2, 3]  # accepted: a silent pick of one of key 2's rows
    # two distinct keys written: DuckDB says 2; MariaDB counts an update twice, SQLite each row
    assert (count == 2) is expected["counts_distinct"], count


def test_each_engines_tuple_count_flag_is_what_count_distinct_does(warehouse: Any) -> None:
    adapter = adapter_for(warehouse.engine)
    pairs = "SELECT 1 AS a, 2 AS b UNION ALL SELECT 1 AS a, 2 AS b UNION ALL SELECT 1 AS a, 3 AS b"
    query = check_deterministic(pairs, adapter.dialect)
    cols = [adapter.column(c, SOURCE_ALIAS) for c in ("a", "b")]
    select = exp.select(exp.Count(this=exp.Distinct(expressions=cols))).from_(adapter.source(query))
    try:
        with warehouse.engine.connect() as conn:
            distinct = adapter.execute(conn, select, {}).scalar_one()
    except sa.exc.DBAPIError:
        distinct = None
    assert (distinct == 2) is EXPECTED[warehouse.kind]["tuples"], distinct
    assert adapter.counts_distinct_tuples is EXPECTED[warehouse.kind]["tuples"]


@pytest.fixture
def loaded(warehouse: Any) -> Any:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    simulate_crash(warehouse.engine, DAY, rows=1247)
    return warehouse


def test_a_clean_merge_runs_no_key_pass_on_any_engine(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key query (GROUP BY key HAVING ..) runs only to name bad keys, never on a clean source."""
    chosen: list[str] = []
    named: list[int] = []
    real_check, real_keys = strategies.key_check, strategies.check_keys
    monkeypatch.setattr(strategies, "key_check", lambda *a: chosen.append(real_check(*a)) or chosen[-1])
    monkeypatch.setattr(strategies, "check_keys", lambda *a, **k: named.append(1) or real_keys(*a, **k))
    result = make("merge").execute(context())
    assert chosen == [EXPECTED[loaded.kind]["check"]]
    assert named == []
    assert (result["rows_inserted"], result["rows_updated"], result["source_rows"]) == (753, 1247, 2000)


def refused_unchanged(loaded: Any, sql: str, error: type[Exception], match: str) -> None:
    """A merge of `sql` raises `error` matching `match` and leaves payouts as it was."""
    before = payouts_snapshot(loaded.engine)
    with pytest.raises(error, match=match):
        make("merge", sql=sql).execute(context())
    assert payouts_snapshot(loaded.engine) == before


@pytest.mark.parametrize(
    "ids, shown",
    [
        ("48001", r"duplicate key\(s\) 48001 \(2 rows\)"),  # an existing key twice
        ("49999", r"duplicate key\(s\) 49999 \(2 rows\)"),  # a new key twice (beyond the crash's 1,247)
        ("48002, 49998", r"duplicate key\(s\) 48002 \(2 rows\), 49998 \(2 rows\)"),
    ],
)
def test_repeated_keys_are_named_and_nothing_is_written(loaded: Any, ids: str, shown: str) -> None:
    sql = f"{PAYOUT_SQL} UNION ALL {PAYOUT_SQL.replace('WHERE', f'WHERE s.sale_id IN ({ids}) AND')}"
    refused_unchanged(loaded, sql, MergeKeyError, shown)


def test_a_null_key_is_named_and_nothing_is_written(loaded: Any) -> None:
    sql = PAYOUT_SQL.replace(
        "SELECT s.sale_id,", "SELECT CASE WHEN s.sale_id = 49990 THEN NULL ELSE s.sale_id END AS sale_id,"
    )
    refused_unchanged(loaded, sql, MergeKeyError, r"NULL key\(s\) None \(1 rows\)")


def test_a_nullable_key_is_counted_in_the_source_pass(warehouse: Any) -> None:
    """A unique key on a nullable column takes NULLs, so no engine can be trusted to refuse them:
    the source pass counts NULL keys on every engine, and names them."""
    with warehouse.engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE idem_nk (k INTEGER, d DATE NOT NULL, v INTEGER, UNIQUE (k))"))
        conn.execute(sa.text("INSERT INTO idem_nk (k, d, v) VALUES (1, '2026-08-25', 0)"))
    sql = (
        "SELECT k, d, v FROM (SELECT NULL AS k, CAST('2026-08-25' AS DATE) AS d, 1 AS v UNION ALL "
        "SELECT 2 AS k, CAST('2026-08-25' AS DATE) AS d, 2 AS v) AS s "
        "WHERE d >= :window_start AND d < :window_end"
    )
    chosen: list[str] = []
    real_check = strategies.key_check
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(strategies, "key_check", lambda *a: chosen.append(real_check(*a)) or chosen[-1])
        with pytest.raises(MergeKeyError, match=r"NULL key\(s\) None \(1 rows\)"):
            make("merge", table="idem_nk", partition_column="d", key_columns=["k"], sql=sql).execute(
                context()
            )
    assert chosen == ["counts"]
    with warehouse.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT k, v FROM idem_nk")).all() == [(1, 0)]


@pytest.mark.parametrize(
    "extra, count",
    [
        ("s.sale_id = 1", 1),  # before the window
        ("s.sale_id = 50001", 1),  # on the window's end: outside, the window is half-open
        ("s.sale_id IN (1, 2, 50001)", 3),
    ],
)
def test_rows_outside_the_window_are_counted_and_nothing_is_written(
    loaded: Any, extra: str, count: int
) -> None:
    """The source pass checks the window on MIN and MAX of the partition column, then counts the rows."""
    match = rf"produced {count} row\(s\) whose sale_date is outside"
    refused_unchanged(loaded, f"{PAYOUT_SQL} OR {extra}", RowsOutsideWindowError, match)


def test_a_null_partition_value_is_outside_the_window(loaded: Any) -> None:
    sql = PAYOUT_SQL.replace(
        "s.sale_date,", "CASE WHEN s.sale_id = 49990 THEN NULL ELSE s.sale_date END AS sale_date,"
    )
    refused_unchanged(loaded, sql, RowsOutsideWindowError, r"produced 1 row\(s\) whose sale_date is outside")

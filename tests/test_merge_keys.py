"""How a merge finds repeated or NULL source keys on each engine, and that the flags tell the truth.

The adapters declare what their native upsert guarantees (`upsert_refuses_repeated_keys`,
`upsert_counts_distinct_rows`, `counts_distinct_tuples`); `strategies.merge` trusts them to skip
the key pass. So each flag is proved here on the real engine, from a source whose answer is
known by construction, and every path still names the keys and leaves the table unchanged.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from sqlglot import exp

from airflow_idempotent import strategies, write_spec
from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.adapters.base import SOURCE_ALIAS
from airflow_idempotent.errors import MergeKeyError, RowsOutsideWindowError
from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payouts, create_sales, simulate_crash
from airflow_idempotent.lint import check_deterministic
from airflow_idempotent.spark.merges import check_merge_source
from airflow_idempotent.window import day_range
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


# --- rows outside the window, refused inside the upsert (`refuses_rows_outside_in_statement`) ------

#: Which engines' failing cast is an error inside a write (measured, not assumed: see the test).
REFUSES_OUTSIDE = {"postgres": True, "mariadb": False, "sqlite": False, "duckdb": False}
WINDOW_DAY = day_range(DAY, DAY)


def upsert_with_guard(warehouse: Any, type_sql: str, source: str) -> tuple[BaseException | None, list[Any]]:
    """The adapter's upsert of `source` into idem_win (partition column `d` of `type_sql`), built
    with the partition guard, bound to the window of DAY: the error it raised, then the table's rows."""
    adapter = adapter_for(warehouse.engine)
    with warehouse.engine.begin() as conn:
        conn.execute(
            sa.text(f"CREATE TABLE idem_win (k INTEGER NOT NULL PRIMARY KEY, d {type_sql}, v INTEGER)")
        )
    with warehouse.engine.connect() as conn:
        info = adapter.describe(conn, "idem_win")
    part = info.column("d", "partition_column")
    binds = adapter.window_params(WINDOW_DAY, part.kind)
    query = check_deterministic(source, adapter.dialect)
    error: BaseException | None = None
    try:
        with warehouse.engine.begin() as conn:
            adapter.execute(conn, adapter.upsert("idem_win", ["k", "d", "v"], ["k"], query, part), binds)
    except sa.exc.DBAPIError as err:
        error = err
    with warehouse.engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(sa.text("SELECT k, d, v FROM idem_win ORDER BY k")).all()]
    return error, rows


def test_each_engines_outside_flag_is_what_its_upsert_does(warehouse: Any) -> None:
    """One row on the window's day, one on the next (the window is half-open): an engine whose
    flag is set refuses the statement and writes nothing; the others write both (their merge
    refuses the row by its pass over the source, tested above)."""
    adapter = adapter_for(warehouse.engine)
    assert adapter.refuses_rows_outside_in_statement is REFUSES_OUTSIDE[warehouse.kind]
    source = (
        "SELECT 1 AS k, CAST('2026-08-25' AS DATE) AS d, 1 AS v UNION ALL "
        "SELECT 2 AS k, CAST('2026-08-26' AS DATE) AS d, 2 AS v"
    )
    error, rows = upsert_with_guard(warehouse, "DATE", source)
    if REFUSES_OUTSIDE[warehouse.kind]:
        assert isinstance(error, sa.exc.DataError) and "row outside the window: 2026-08-26" in str(error)
        assert rows == []
    else:
        assert error is None and [k for k, _, _ in rows] == [1, 2]


@pytest.mark.parametrize(
    "type_sql, inside, outside, shown",
    [
        ("DATE", "2026-08-25", "2026-08-24", "2026-08-24"),
        ("TIMESTAMP", "2026-08-25 23:59:59.999999", "2026-08-26 00:00:00", "2026-08-26 00:00:00"),
        (
            "TIMESTAMP WITH TIME ZONE",
            "2026-08-25 00:00:00+00",
            "2026-08-25 01:59:59+02",
            "2026-08-24 23:59:59",
        ),
        ("DATE", "2026-08-25", None, ""),  # NULL is outside every window
    ],
)
def test_postgres_refuses_a_row_outside_the_window_of_each_partition_type_in_the_upsert(
    warehouse: Any, type_sql: str, inside: str, outside: str | None, shown: str
) -> None:
    if warehouse.kind != "postgres":
        pytest.skip("the failing cast is PostgreSQL's (REFUSES_OUTSIDE)")
    value = "NULL" if outside is None else f"CAST('{outside}' AS {type_sql})"
    row_in = f"SELECT 1 AS k, CAST('{inside}' AS {type_sql}) AS d, 1 AS v"
    error, rows = upsert_with_guard(
        warehouse, type_sql, f"{row_in} UNION ALL SELECT 2 AS k, {value} AS d, 2 AS v"
    )
    assert isinstance(error, sa.exc.DataError), error
    assert f"row outside the window: {shown}" in str(error)
    assert rows == []
    # the row inside alone passes the guard unchanged (the upsert writes the source's own value)
    with warehouse.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE idem_win"))
    error, rows = upsert_with_guard(warehouse, type_sql, row_in)
    assert error is None
    with warehouse.engine.connect() as conn:
        expected = conn.execute(sa.text(f"SELECT CAST('{inside}' AS {type_sql})")).scalar_one()
    assert rows == [(1, expected, 1)]


def test_a_clean_merge_reads_the_source_once_where_the_upsert_refuses_everything(loaded: Any) -> None:
    """Where the upsert refuses repeated and NULL keys and rows outside the window itself
    (PostgreSQL), the only statement reading the source is the upsert; elsewhere one pass
    (the profile) runs before it."""
    reads: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        head = statement.split()[0].upper()
        if "sales" in statement and head in ("SELECT", "INSERT"):  # not its catalog (SHOW, PRAGMA)
            reads.append(head)

    engine_cls = sa.engine.Engine
    sa.event.listen(engine_cls, "before_cursor_execute", seen)
    try:
        result = make("merge", delete_missing=False).execute(context())
    finally:
        sa.event.remove(engine_cls, "before_cursor_execute", seen)
    assert (result["rows_inserted"], result["rows_updated"], result["source_rows"]) == (753, 1247, 2000)
    adapter = adapter_for(loaded.engine)
    once = adapter.upsert_refuses_repeated_keys and adapter.refuses_rows_outside_in_statement
    assert reads == (["INSERT"] if once else ["SELECT", "INSERT"])


def test_an_error_of_the_select_itself_is_raised_as_the_database_gave_it(loaded: Any) -> None:
    """A failing upsert is diagnosed for bad keys and rows outside the window; when the source has
    neither, the database's own error reaches the user unchanged, and nothing is written."""
    if loaded.kind != "postgres":
        pytest.skip("division by zero is an error in PostgreSQL's SELECT (NULL or a warning elsewhere)")
    sql = PAYOUT_SQL.replace("s.price_eur *", "s.price_eur / (s.sale_id - 49990) * (s.sale_id - 49990) *")
    refused_unchanged(loaded, sql, sa.exc.DataError, "division by zero")


MOVE_TYPES = {
    "postgres": ["DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE"],
    "mariadb": ["DATE", "DATETIME(6)"],
    "sqlite": ["DATE", "TIMESTAMP"],
    "duckdb": ["DATE", "TIMESTAMP", "TIMESTAMPTZ"],
}


def test_a_merge_refuses_to_move_a_row_into_the_window_for_each_partition_type(warehouse: Any) -> None:
    """Key 2 lies on the day before the window; a merge of the window whose source carries key 2
    (dated inside the window) would move it out of that day. Every engine refuses it (in the
    statement, or by the upsert's short row count on DuckDB), names key 2 and its day, and leaves
    the table as it was; key 1, inside the window, merges when alone."""
    adapter = adapter_for(warehouse.engine)
    warehouse.engine.dispose()  # pooled connections opened before the adapter lack SQLite's hash
    ddl = "CREATE TABLE {} (k INTEGER NOT NULL PRIMARY KEY, d {} NOT NULL, v INTEGER)"
    for type_sql in MOVE_TYPES[warehouse.kind]:
        aware = "ZONE" in type_sql or type_sql == "TIMESTAMPTZ"
        tz = dt.timezone.utc if aware else None
        if type_sql == "DATE":
            inside, before = dt.date(2026, 8, 25), dt.date(2026, 8, 24)
        else:
            inside, before = dt.datetime(2026, 8, 25, 6, tzinfo=tz), dt.datetime(2026, 8, 24, 6, tzinfo=tz)
        with warehouse.engine.begin() as conn:
            for table in ("idem_win", "idem_src"):
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
                conn.execute(sa.text(ddl.format(table, type_sql)))
            insert = "INSERT INTO {} (k, d, v) VALUES (:k, :d, :v)"
            conn.execute(
                sa.text(insert.format("idem_win")),
                [{"k": 1, "d": inside, "v": 1}, {"k": 2, "d": before, "v": 1}],
            )
            conn.execute(
                sa.text(insert.format("idem_src")),
                [{"k": 1, "d": inside, "v": 5}, {"k": 2, "d": inside, "v": 5}],
            )

        def table_rows() -> list[tuple[Any, ...]]:
            with warehouse.engine.connect() as conn:
                return [
                    tuple(r) for r in conn.execute(sa.text("SELECT k, d, v FROM idem_win ORDER BY k")).all()
                ]

        def merge_of(sql: str) -> write_spec.WriteResult:
            query = check_deterministic(sql, adapter.dialect)
            spec = write_spec.WriteSpec("idem_win", query, WINDOW_DAY, "d")
            return strategies.merge(adapter, spec, ["k"])

        rows = table_rows()
        with pytest.raises(
            MergeKeyError, match=r"holds outside the window 2026-08-25, e\.g\. 2 \(d 2026-08-24"
        ):
            merge_of("SELECT k, d, v FROM idem_src")
        assert table_rows() == rows, type_sql
        result = merge_of("SELECT k, d, v FROM idem_src WHERE k = 1")
        assert (result.source_rows, result.rows_updated) == (1, 1), type_sql
        assert [r[2] for r in table_rows()] == [5, 1], type_sql


def test_the_one_source_query_finds_each_refusal_in_order(warehouse: Any) -> None:
    """`merge_source_problems` (Spark's one pass for `check_keys` and `raise_held_outside`) on each
    engine: the repeated and NULL keys first, then a row outside the window, then the keys the
    table holds outside it (on another day, or with no day), each row as built by hand here."""
    adapter = adapter_for(warehouse.engine)
    warehouse.engine.dispose()
    inside, before = dt.date(2026, 8, 25), dt.date(2026, 8, 24)
    target = [(1, inside), (2, before), (5, None), (6, inside)]
    source = [(1, inside), (2, inside), (3, inside), (3, inside), (None, inside), (4, before), (5, inside)]
    with warehouse.engine.begin() as conn:
        for table, rows in (("idem_msp_t", target), ("idem_msp_s", source)):
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
            conn.execute(sa.text(f"CREATE TABLE {table} (k INTEGER, d DATE)"))
            conn.execute(
                sa.text(f"INSERT INTO {table} (k, d) VALUES (:k, :d)"), [{"k": k, "d": d} for k, d in rows]
            )
    spec = write_spec.WriteSpec(
        "idem_msp_t", check_deterministic("SELECT k, d FROM idem_msp_s", adapter.dialect), WINDOW_DAY, "d"
    )
    with warehouse.engine.connect() as conn:
        info, _, params = strategies.prepare(adapter, conn, spec)
        query = adapter.merge_source_problems(spec.table, spec.query, ["k"], "d", 11)
        rows = [tuple(r) for r in adapter.execute(conn, query, params).all()]
        held = [(k, str(d) if d is not None else None) for k, *_, d in rows[3:]]
        assert sorted(rows[:2], key=str) == [(3, 2, 0, 0, None), (None, 1, 0, 0, None)]
        assert rows[2] == (4, 1, 1, 0, None)
        assert [r[1:4] for r in rows[3:]] == [(1, 0, 1), (1, 0, 1)]
        assert held == [(2, str(before)), (5, None)]
        with pytest.raises(MergeKeyError, match=r"duplicate key\(s\) 3 \(2 rows\) and NULL key\(s\) None"):
            check_merge_source(adapter, conn, spec, info=info, keys=["k"], params=params)

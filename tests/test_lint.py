"""Determinism lint: SQL that reads the clock, randomness or a sequence is refused before it runs."""

from __future__ import annotations

import logging

import pytest
import sqlglot
from sqlglot import exp

from airflow_idempotent.errors import NonDeterministicSQLError, SqlParseError
from airflow_idempotent.lint import (
    DIALECTS,
    Finding,
    check_deterministic,
    find_nondeterminism,
    parse_one_statement,
)

ALL = ("postgres", "mysql", "sqlite", "duckdb")
NOT_SQLITE = ("postgres", "mysql", "duckdb")

# (SQL expression, reported function, kind, dialects in which it parses as that function)
CASES: list[tuple[str, str, str, tuple[str, ...]]] = [
    # clock
    ("now()", "now", "clock", ALL),
    ("NOW()", "now", "clock", ALL),
    ("current_date", "current_date", "clock", ALL),
    ("current_time", "current_time", "clock", ALL),
    ("current_timestamp", "current_timestamp", "clock", ALL),
    ("CURRENT_TIMESTAMP(3)", "current_timestamp", "clock", ALL),
    ("localtime", "localtime", "clock", NOT_SQLITE),  # SQLite has no such keyword: a column
    ("localtimestamp", "localtimestamp", "clock", NOT_SQLITE),
    ("sysdate()", "sysdate", "clock", ALL),
    ("getdate()", "getdate", "clock", ALL),
    ("getutcdate()", "getutcdate", "clock", ALL),
    ("sysdatetime()", "sysdatetime", "clock", ALL),
    ("curdate()", "curdate", "clock", ALL),
    ("curtime()", "curtime", "clock", ALL),
    ("utc_date()", "utc_date", "clock", ALL),
    ("utc_time()", "utc_time", "clock", ALL),
    ("utc_timestamp()", "utc_timestamp", "clock", ALL),
    ("utc_timestamp", "utc_timestamp", "clock", ("mysql",)),  # a reserved word only in MySQL
    ("unix_timestamp()", "unix_timestamp", "clock", ALL),
    ("clock_timestamp()", "clock_timestamp", "clock", ALL),
    ("statement_timestamp()", "statement_timestamp", "clock", ALL),
    ("transaction_timestamp()", "transaction_timestamp", "clock", ALL),
    ("timeofday()", "timeofday", "clock", ALL),
    ("today()", "today", "clock", ALL),
    ("get_current_time()", "get_current_time", "clock", ALL),
    ("get_current_timestamp()", "get_current_timestamp", "clock", ALL),
    ("current_localtimestamp()", "current_localtimestamp", "clock", ALL),
    ("age(sale_date)", "age", "clock", ("postgres", "duckdb")),
    ("date('now')", "date('now')", "clock", ALL),
    ("time('now')", "time('now')", "clock", ALL),
    ("datetime('now')", "datetime('now')", "clock", ALL),
    ("datetime('NOW', 'localtime')", "datetime('now')", "clock", ALL),
    ("julianday('now')", "julianday('now')", "clock", ALL),
    ("strftime('%s', 'now')", "strftime('now')", "clock", ALL),
    ("unixepoch('now')", "unixepoch('now')", "clock", ALL),
    ("date('now', 'start of month')", "date('now')", "clock", ALL),
    ("date()", "date('now')", "clock", ("sqlite",)),  # SQLite assumes 'now' when omitted
    ("datetime()", "datetime('now')", "clock", ("sqlite",)),
    ("strftime('%s')", "strftime('now')", "clock", ("sqlite",)),
    ("'now'::timestamp", "'now'::timestamp", "clock", ALL),
    ("CAST('today' AS DATE)", "'today'::date", "clock", ALL),
    ("timestamp 'now'", "'now'::timestamp", "clock", ALL),
    ("date 'tomorrow'", "'tomorrow'::date", "clock", ALL),
    ("'yesterday'::date", "'yesterday'::date", "clock", ALL),
    # random
    ("random()", "random", "random", ALL),
    ("rand()", "rand", "random", ALL),
    ("randn()", "randn", "random", ALL),
    ("random_uuid()", "random_uuid", "random", ALL),
    ("uuid()", "uuid", "random", ALL),
    ("uuid_generate_v1()", "uuid_generate_v1", "random", ALL),
    ("uuid_generate_v1mc()", "uuid_generate_v1mc", "random", ALL),
    ("uuid_generate_v4()", "uuid_generate_v4", "random", ALL),
    ("gen_random_uuid()", "gen_random_uuid", "random", ALL),
    ("newid()", "newid", "random", ALL),
    ("sys_guid()", "sys_guid", "random", ALL),
    ("setseed(0.5)", "setseed", "random", ALL),
    ("random_bytes(16)", "random_bytes", "random", ALL),
    ("gen_random_bytes(16)", "gen_random_bytes", "random", ALL),
    ("randomblob(16)", "randomblob", "random", ALL),
    ("uuid_short()", "uuid_short", "random", ALL),
    # sequence
    ("nextval('order_seq')", "nextval", "sequence", ALL),
    ("currval('order_seq')", "currval", "sequence", ALL),
    ("lastval()", "lastval", "sequence", ALL),
    ("setval('order_seq', 1)", "setval", "sequence", ALL),
    ("last_insert_id()", "last_insert_id", "sequence", ALL),
    ("last_insert_rowid()", "last_insert_rowid", "sequence", ALL),
]

PARAMS = [
    pytest.param(dialect, sql, function, kind, id=f"{dialect}-{sql}")
    for sql, function, kind, dialects in CASES
    for dialect in dialects
]

PAYOUT_SQL = (
    "SELECT s.sale_id, s.sale_date, ROUND(s.price_eur * CASE WHEN :policy_version = 'v2' AND "
    "s.price_eur >= 400 THEN 0.55 ELSE 0.60 END, 2) AS amount_eur, CASE WHEN :policy_version = 'v2' "
    "AND s.price_eur >= 400 THEN 0.55 ELSE 0.60 END AS rate FROM sales s "
    "WHERE s.sale_date >= :window_start AND s.sale_date < :window_end"
)

FIX_TEXT = (
    "compare with the window parameters :window_start / :window_end (or the {{ window_start }} "
    "template variables) instead of the clock; if this is truly intended, list the function in "
    "allow_functions=[...]"
)


def test_dialects_constant() -> None:
    assert DIALECTS == ("postgres", "mysql", "sqlite", "duckdb", "spark")


@pytest.mark.parametrize(("dialect", "sql", "function", "kind"), PARAMS)
def test_function_in_select_list_is_found(dialect: str, sql: str, function: str, kind: str) -> None:
    findings = find_nondeterminism(f"SELECT sale_id, {sql} AS x FROM sales", dialect)
    assert [(f.function, f.kind) for f in findings] == [(function, kind)]


@pytest.mark.parametrize(("dialect", "sql", "function", "kind"), PARAMS)
def test_function_in_where_clause_is_refused(dialect: str, sql: str, function: str, kind: str) -> None:
    with pytest.raises(NonDeterministicSQLError) as err:
        check_deterministic(f"SELECT sale_id FROM sales WHERE sale_date < {sql}", dialect)
    assert f"{function} ({kind}: " in str(err.value)


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        ("postgres", [Finding("now", "clock", "CURRENT_TIMESTAMP"), Finding("random", "random", "RANDOM()")]),
        ("mysql", [Finding("now", "clock", "NOW()"), Finding("random", "random", "RAND()")]),
        ("sqlite", [Finding("now", "clock", "NOW()"), Finding("random", "random", "RANDOM()")]),
        ("duckdb", [Finding("now", "clock", "NOW()"), Finding("random", "random", "RANDOM()")]),
    ],
)
def test_fragment_is_regenerated_in_the_dialect(dialect: str, expected: list[Finding]) -> None:
    assert find_nondeterminism("SELECT now() AS a, random() AS b FROM t", dialect) == expected


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        ("postgres", [Finding("'now'::timestamp", "clock", "CAST('now' AS TIMESTAMP)")]),
        ("sqlite", [Finding("'now'::timestamp", "clock", "DATETIME('now')")]),
    ],
)
def test_special_string_cast_fragment(dialect: str, expected: list[Finding]) -> None:
    assert find_nondeterminism("SELECT 'now'::timestamp AS a", dialect) == expected


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize(
    ("sql", "functions"),
    [
        (
            "WITH recent AS (SELECT id FROM t WHERE d > current_date) "
            "SELECT r.id, CASE WHEN random() > 0.5 THEN 1 ELSE 0 END AS coin, "
            "row_number() OVER (ORDER BY uuid()) AS rn "
            "FROM recent r WHERE r.id IN (SELECT id FROM u WHERE ts < now())",
            ["current_date", "random", "uuid", "now"],
        ),
        ("SELECT sum(x) OVER (PARTITION BY g ORDER BY rand()) AS s FROM t", ["rand"]),
        (
            "SELECT t.a FROM t JOIN u ON u.id = t.id AND u.d < now() GROUP BY t.a "
            "HAVING max(t.d) < current_date ORDER BY random()",
            ["now", "current_date", "random"],
        ),
        ("SELECT coalesce(d, now()) AS d FROM t", ["now"]),
        ("SELECT a FROM (SELECT a, random() AS r FROM t) AS sub", ["random"]),
        ("INSERT INTO t (a, loaded_at) SELECT a, now() FROM u", ["now"]),
        ("UPDATE t SET loaded_at = current_timestamp WHERE id = 1", ["current_timestamp"]),
        ("DELETE FROM t WHERE d < current_date", ["current_date"]),
        ("INSERT INTO t (id, a) VALUES (nextval('s'), 1)", ["nextval"]),
    ],
    ids=[
        "cte-case-window-subquery",
        "window",
        "join-having-order",
        "nested",
        "derived",
        "insert",
        "update",
        "delete",
        "values",
    ],
)
def test_found_everywhere_in_the_statement(dialect: str, sql: str, functions: list[str]) -> None:
    assert [f.function for f in find_nondeterminism(sql, dialect)] == functions


@pytest.mark.parametrize("dialect", ALL)
def test_source_order_and_deduplication(dialect: str) -> None:
    sql = "SELECT random() AS a, now() AS b, random() AS c, RANDOM() AS d FROM t WHERE d < now()"
    assert [f.function for f in find_nondeterminism(sql, dialect)] == ["random", "now"]


@pytest.mark.parametrize("dialect", ALL)
def test_several_statements_are_all_checked(dialect: str) -> None:
    findings = find_nondeterminism("SELECT 1; SELECT random(); SELECT now()", dialect)
    assert [f.function for f in findings] == ["random", "now"]


@pytest.mark.parametrize("dialect", ALL)
def test_parsed_expression_is_accepted(dialect: str) -> None:
    expression = parse_one_statement("SELECT a FROM t WHERE d < now()", dialect)
    assert [f.function for f in find_nondeterminism(expression, dialect)] == ["now"]


def test_expression_parsed_elsewhere_reports_sqlglot_name() -> None:
    """Without our parser the written name is lost: PostgreSQL's now() is CURRENT_TIMESTAMP."""
    expression = sqlglot.parse_one("SELECT now(), random() FROM t", read="postgres")
    assert isinstance(expression, exp.Expression)
    assert find_nondeterminism(expression, "postgres") == [
        Finding("current_timestamp", "clock", "CURRENT_TIMESTAMP"),
        Finding("random", "random", "RANDOM()"),
    ]


NEGATIVE = [
    PAYOUT_SQL,
    'SELECT known_now, now_utc, t.now, t.random, "now", "random" FROM t',
    "SELECT now, random, current_date_id, utc_date_key FROM t",
    "SELECT 'nowhere', 'now', 'random()', 'today' AS label FROM t WHERE note = 'now'",
    "SELECT unix_timestamp(sale_date) AS ts FROM sales",
    "SELECT age(end_date, start_date) AS span FROM t",
    "SELECT date('2024-01-01'), date(sale_date), strftime('%Y', sale_date) FROM sales",
    "SELECT CAST('2024-01-01' AS DATE), 'epoch'::timestamp, CAST('now' AS TEXT) FROM t",
    "SELECT date(CASE WHEN status = 'today' THEN sale_date END) AS d FROM t",
    "SELECT uuid_generate_v5(ns, name) AS id FROM t",
    "SELECT date_trunc('day', sale_date), extract(year FROM sale_date) FROM sales",
    "SELECT sum(price) OVER (PARTITION BY region ORDER BY sale_date) AS running FROM sales",
    "INSERT INTO payouts (sale_id, amount) SELECT sale_id, price * 0.6 FROM sales "
    "WHERE sale_date >= :window_start AND sale_date < :window_end",
]


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("sql", NEGATIVE)
def test_deterministic_sql_has_no_findings(dialect: str, sql: str) -> None:
    assert find_nondeterminism(sql, dialect) == []
    assert isinstance(check_deterministic(sql, dialect), exp.Expression)


@pytest.mark.parametrize("dialect", ("postgres", "sqlite", "duckdb"))
def test_utc_date_without_parentheses_is_a_column_outside_mysql(dialect: str) -> None:
    assert find_nondeterminism("SELECT utc_date, localtime_id FROM t", dialect) == []


def test_quoted_reserved_word_is_a_column_in_mysql() -> None:
    assert find_nondeterminism("SELECT `utc_date`, t.utc_timestamp FROM t", "mysql") == []


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT :window_start AS ws, a FROM t WHERE d >= :window_start AND d < :window_end",
        "SELECT :window_start",
        "SELECT %(window_start)s AS ws, a FROM t WHERE d >= %(window_start)s AND d < %(window_end)s",
        "SELECT CAST(:window_start AS DATE), a % 2 AS odd FROM t WHERE d < :window_end",
    ],
)
def test_named_placeholders_parse_and_keep_their_names(dialect: str, sql: str) -> None:
    expression = parse_one_statement(sql, dialect)
    names = {p.name for p in expression.find_all(exp.Placeholder)}
    assert names <= {"window_start", "window_end"}
    assert "window_start" in names
    assert find_nondeterminism(sql, dialect) == []


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a FROM t WHERE d >= %s AND d < %s",
        "SELECT a FROM t WHERE d >= $1 AND d < $2",
        "SELECT a FROM t WHERE d >= ? AND d < ?",
    ],
)
def test_positional_placeholders_parse(dialect: str, sql: str) -> None:
    assert isinstance(parse_one_statement(sql, dialect), exp.Select)
    assert find_nondeterminism(sql, dialect) == []


@pytest.mark.parametrize("dialect", ALL)
def test_payout_select_passes_and_is_returned(dialect: str) -> None:
    expression = check_deterministic(PAYOUT_SQL, dialect)
    assert isinstance(expression, exp.Select)
    assert [s.alias_or_name for s in expression.selects] == ["sale_id", "sale_date", "amount_eur", "rate"]


@pytest.mark.parametrize("dialect", ALL)
def test_allow_list_lets_one_function_through_with_a_warning(
    dialect: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="airflow_idempotent.lint"):
        expression = check_deterministic("SELECT a, now() AS loaded_at FROM t", dialect, allow=["NOW"])
    assert isinstance(expression, exp.Select)
    assert "allowed by allow_functions: now" in caplog.text
    assert [r.levelno for r in caplog.records if r.name == "airflow_idempotent.lint"] == [logging.WARNING]


@pytest.mark.parametrize("dialect", ALL)
def test_allow_list_does_not_let_other_functions_through(dialect: str) -> None:
    with pytest.raises(NonDeterministicSQLError) as err:
        check_deterministic("SELECT now() AS a, random() AS b FROM t", dialect, allow=["now"])
    message = str(err.value)
    assert "random (random: " in message
    assert "now (clock" not in message
    assert "allow_functions=['random']" in message


def test_allow_list_accepts_a_single_string_and_sqlite_names(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="airflow_idempotent.lint"):
        check_deterministic("SELECT datetime('now') AS ts", "sqlite", allow="DATETIME('now')")
    assert "allowed by allow_functions: datetime('now')" in caplog.text


@pytest.mark.parametrize(
    ("dialect", "fragment"),
    [("postgres", "CURRENT_TIMESTAMP"), ("mysql", "NOW()"), ("sqlite", "NOW()"), ("duckdb", "NOW()")],
)
def test_error_message_names_function_reason_and_fix(dialect: str, fragment: str) -> None:
    with pytest.raises(NonDeterministicSQLError) as err:
        check_deterministic("SELECT a FROM t WHERE d < now() AND id = nextval('s')", dialect)
    message = str(err.value)
    assert f"now (clock: {fragment})" in message
    assert "nextval (sequence: NEXTVAL('s'))" in message
    assert "a rerun of this window would not reproduce the first run" in message
    assert FIX_TEXT in message


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("sql", ["", "   \n\t", "-- only a comment", "/* nothing */ ;"])
def test_empty_sql_is_a_parse_error(dialect: str, sql: str) -> None:
    with pytest.raises(SqlParseError, match="the SQL is empty") as err:
        parse_one_statement(sql, dialect)
    assert "give one SELECT statement" in str(err.value)


@pytest.mark.parametrize("dialect", ALL)
def test_two_statements_are_a_parse_error(dialect: str) -> None:
    with pytest.raises(SqlParseError) as err:
        check_deterministic("SELECT a FROM t; DELETE FROM t", dialect)
    message = str(err.value)
    assert "2 statements" in message
    assert "give one SELECT statement; move other statements to their own task" in message


@pytest.mark.parametrize("dialect", ALL)
def test_trailing_semicolon_is_one_statement(dialect: str) -> None:
    assert isinstance(parse_one_statement("SELECT a FROM t;  -- done\n", dialect), exp.Select)


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("sql", ["SELEC a FROM t", "SELECT (a FROM t", "SELECT 'unterminated FROM t"])
def test_syntax_error_is_a_parse_error(dialect: str, sql: str) -> None:
    with pytest.raises(SqlParseError) as err:
        parse_one_statement(sql, dialect)
    message = str(err.value)
    assert f"could not parse the SQL as {dialect}" in message
    assert "fix the syntax" in message
    assert "\x1b[" not in message


@pytest.mark.parametrize("dialect", ALL)
def test_statement_sqlglot_cannot_read_is_a_parse_error(dialect: str) -> None:
    with pytest.raises(SqlParseError, match="cannot be checked"):
        parse_one_statement("VACUUM", dialect)


@pytest.mark.parametrize("call", [parse_one_statement, find_nondeterminism, check_deterministic])
def test_unknown_dialect_lists_supported_ones(call: object) -> None:
    with pytest.raises(SqlParseError) as err:
        call("SELECT 1", "oracle")  # type: ignore[operator]
    message = str(err.value)
    assert "'oracle'" in message
    assert "postgres, mysql, sqlite, duckdb" in message
    assert "MariaDB uses 'mysql'" in message


def test_dialect_name_is_case_insensitive() -> None:
    assert [f.function for f in find_nondeterminism("SELECT now()", "DuckDB")] == ["now"]


def test_sqlite_date_function_with_explicit_clock_argument_reports_the_argument() -> None:
    findings = find_nondeterminism("SELECT strftime('%s', current_timestamp) AS ts", "sqlite")
    assert [f.function for f in findings] == ["current_timestamp"]


def test_an_update_that_sets_only_literals_is_marked_constant() -> None:
    from airflow_idempotent.lint import sql_writes

    cases = {
        "UPDATE dag_lock SET available = False": True,
        "UPDATE jobs SET status = 'done', error = NULL WHERE day = '2024-01-01'": True,
        "UPDATE jobs SET status = other_status": False,
        "UPDATE jobs SET tries = 1 + 1": False,
        "UPDATE jobs AS j SET status = 'done' FROM staged AS s WHERE j.id = s.id": False,
    }
    for sql, constant in cases.items():
        (write,) = sql_writes(sql, "postgres")
        assert (write.how, write.constant) == ("update", constant), sql

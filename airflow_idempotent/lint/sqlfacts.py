"""What a SQL text does, read with sqlglot: the tables each statement writes and how, its clock reads.

`sql_writes` is the public question ("which tables does this SQL change, and how?"): the DAG linter
and the idempotency harness (to find a SQL task's targets) both ask it. Jinja expressions are
replaced by identifiers before parsing and put back in what is reported.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from airflow_idempotent.errors import SqlParseError
from airflow_idempotent.lint.parsing import DIALECTS, parse_statements
from airflow_idempotent.lint.sql import Finding, find_nondeterminism

__all__ = ["SqlFacts", "SqlStatement", "SqlWrite", "analyse_sql", "sql_writes", "strip_jinja"]

_JINJA_EXPR = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_JINJA_OTHER = re.compile(r"\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_RELATIVE_MODIFIER = re.compile(
    r"'\s*[+-]?\s*\d+(?:\.\d+)?\s*(?:second|minute|hour|day|week|month|year)s?\s*'", re.IGNORECASE
)
#: Operator arguments whose templates are read elsewhere (or are no templates at all).


@dataclass(frozen=True)
class SqlWrite:
    """A table a SQL statement changes, and how: the harness uses this to find a task's targets."""

    table: str
    how: str
    """overwrite, delete, truncate, replace, upsert, merge, keyed-insert, append, update, accumulate"""
    detail: str


@dataclass
class SqlStatement:
    """One statement: its kind, what it writes, its clock reads and bound parameters."""

    kind: str
    writes: list[SqlWrite]
    clock: list[Finding]  # reads of the clock, randomness or a sequence
    relative: list[Finding]  # clock reads shifted by a span: "the last N hours"
    placeholders: list[str]
    high_water: str | None = None
    key: str | None = None
    #: clock reads in WHERE / JOIN / HAVING: they decide which rows the window is
    filtering: set[Finding] = field(default_factory=set)


@dataclass
class SqlFacts:
    """A SQL text's statements, the dialect that read them (or the parse error) and its Jinja."""

    statements: list[SqlStatement]
    dialect: str | None
    error: str | None
    jinja: list[str]


_ARITHMETIC: tuple[type[exp.Expression], ...] = tuple(
    cls
    for name in (
        "Add",
        "Sub",
        "DateAdd",
        "DateSub",
        "DatetimeAdd",
        "DatetimeSub",
        "TimestampAdd",
        "TimestampSub",
        "TimeAdd",
        "TimeSub",
        "TsOrDsAdd",
    )
    if (cls := getattr(exp, name, None)) is not None
)


def _table_name(node: exp.Expression | None) -> str | None:
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table) or not node.name:
        return None
    parts = [p for p in (node.args.get("catalog"), node.args.get("db")) if p]
    names = [p.name for p in parts if isinstance(p, exp.Expression)] + [node.name]
    return ".".join(names).lower()


def strip_jinja(sql: str) -> tuple[str, list[str]]:
    """(SQL with Jinja expressions replaced by identifiers, which parse inside or outside quotes;
    the expressions' texts)."""
    found: list[str] = []

    def repl(match: re.Match[str]) -> str:
        found.append(match.group(1).strip())
        return f"idem_jinja_{len(found)}"

    text = _JINJA_EXPR.sub(repl, sql)
    return _JINJA_OTHER.sub(" ", text), found


@contextlib.contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _parse_any(sql: str, dialects: Sequence[str]) -> tuple[list[exp.Expression], str | None, str | None]:
    """Parse with the first dialect that reads every statement; else each `;`-chunk on its own."""
    error: str | None = None
    with _quiet_sqlglot():
        for dialect in dialects:
            try:
                return parse_statements(sql, dialect), dialect, None
            except SqlParseError as err:
                error = error or str(err)
        statements: list[exp.Expression] = []
        for chunk in sql.split(";"):
            if not chunk.strip():
                continue
            for dialect in dialects:
                try:
                    statements.extend(parse_statements(chunk, dialect))
                    break
                except SqlParseError:
                    continue
    return statements, (dialects[0] if statements else None), error


def analyse_sql(sql: str, dialect: str | None) -> SqlFacts:
    """Every statement of `sql` (in `dialect`, else the first dialect that reads it) and its facts."""
    text, jinja = strip_jinja(sql)
    dialects = (dialect,) if dialect else DIALECTS
    statements, used, error = _parse_any(text, dialects)
    facts = SqlFacts([], used, error if not statements else None, jinja)
    if not statements:
        facts.statements.extend(_fallback_statements(text))
        return facts
    assert used is not None
    for stmt in statements:
        one = _statement(stmt, used)
        one.writes = [SqlWrite(w.table, w.how, _restore_jinja(w.detail, jinja)) for w in one.writes]
        facts.statements.append(one)
    return facts


def _restore_jinja(text: str, jinja: Sequence[str]) -> str:
    """Put the Jinja expressions back where strip_jinja left identifiers."""

    def repl(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        return "{{ " + jinja[index] + " }}" if 0 <= index < len(jinja) else match.group(0)

    return re.sub(r"idem_jinja_(\d+)", repl, text)


def _fallback_statements(text: str) -> list[SqlStatement]:
    """Statements sqlglot cannot read (e.g. MySQL's REPLACE INTO): classified by their first words."""
    out: list[SqlStatement] = []
    for chunk in text.split(";"):
        match = re.match(r"\s*(replace|insert)\s+(?:ignore\s+)?into\s+([\w.`\"]+)", chunk, re.IGNORECASE)
        if match is None:
            continue
        table = match.group(2).replace("`", "").replace('"', "").lower()
        if match.group(1).lower() == "replace":
            out.append(
                SqlStatement("replace", [SqlWrite(table, "replace", f"REPLACE INTO {table}")], [], [], [])
            )
        else:
            out.append(
                SqlStatement("insert", [SqlWrite(table, "append", f"INSERT INTO {table}")], [], [], [])
            )
    return out


def _statement(stmt: exp.Expression, dialect: str) -> SqlStatement:
    clock, relative = _clock_fragments(stmt, dialect)
    placeholders = sorted({p.name for p in stmt.find_all(exp.Placeholder) if p.name})
    result = SqlStatement(type(stmt).__name__.lower(), [], clock, relative, placeholders)
    for node in stmt.find_all(exp.Where, exp.Join, exp.Having):
        result.filtering.update(f for f in find_nondeterminism(node, dialect) if f.kind == "clock")
    if isinstance(stmt, exp.Insert):
        table = _table_name(stmt.this)
        if table is None:
            return result
        conflict = stmt.args.get("conflict")
        if isinstance(conflict, exp.OnConflict):
            keys = conflict.args.get("conflict_keys") or []
            key = ", ".join(re.sub(r" NULLS (LAST|FIRST)$", "", k.sql()) for k in keys) if keys else None
            style = "ON DUPLICATE KEY UPDATE" if conflict.args.get("duplicate") else "ON CONFLICT"
            result.key = key
            detail = f"INSERT INTO {table} .. {style}" + (f" ({key})" if key else "")
            result.writes.append(SqlWrite(table, "upsert", detail))
        elif stmt.args.get("overwrite"):
            result.writes.append(SqlWrite(table, "replace", f"INSERT OVERWRITE {table}"))
        elif (stmt.args.get("alternative") or "").upper() == "REPLACE":
            result.writes.append(SqlWrite(table, "replace", f"INSERT OR REPLACE INTO {table}"))
        elif stmt.args.get("ignore") or (stmt.args.get("alternative") or "").upper() == "IGNORE":
            result.writes.append(SqlWrite(table, "keyed-insert", f"INSERT IGNORE INTO {table}"))
        else:
            result.writes.append(SqlWrite(table, "append", f"INSERT INTO {table}"))
        result.high_water = _high_water(stmt, table, dialect)
    elif isinstance(stmt, exp.Merge):
        table = _table_name(stmt.this)
        if table:
            on = stmt.args.get("on")
            result.key = on.sql(dialect=dialect) if isinstance(on, exp.Expression) else None
            result.writes.append(SqlWrite(table, "merge", f"MERGE INTO {table} ON {result.key}"))
    elif isinstance(stmt, exp.Delete):
        table = _table_name(stmt.this)
        if table:
            where = stmt.args.get("where")
            detail = f"DELETE FROM {table}" + (f" {where.sql(dialect=dialect)}" if where else "")
            result.writes.append(SqlWrite(table, "delete", detail))
    elif isinstance(stmt, exp.TruncateTable):
        for t in stmt.expressions:
            if (name := _table_name(t)) is not None:
                result.writes.append(SqlWrite(name, "truncate", f"TRUNCATE {name}"))
    elif isinstance(stmt, exp.Update):
        table = _table_name(stmt.this)
        if table:
            accumulating = _accumulating(stmt)
            if accumulating:
                result.writes.append(SqlWrite(table, "accumulate", f"UPDATE {table} SET {accumulating}"))
            else:
                result.writes.append(SqlWrite(table, "update", f"UPDATE {table}"))
    elif isinstance(stmt, exp.Create) and stmt.args.get("kind") == "TABLE":
        table = _table_name(stmt.this)
        if table and stmt.args.get("replace"):
            result.writes.append(SqlWrite(table, "replace", f"CREATE OR REPLACE TABLE {table}"))
        elif table and isinstance(stmt.args.get("expression"), exp.Query):
            result.writes.append(SqlWrite(table, "create", f"CREATE TABLE {table} AS SELECT"))
    elif isinstance(stmt, exp.Drop) and (stmt.args.get("kind") or "").upper() == "TABLE":
        for t in stmt.args.get("tables") or [stmt.this]:
            if (name := _table_name(t)) is not None:
                result.writes.append(SqlWrite(name, "drop", f"DROP TABLE {name}"))
    return result


def _clock_fragments(stmt: exp.Expression, dialect: str) -> tuple[list[Finding], list[Finding]]:
    """(plain clock/random reads, clock reads inside date arithmetic: "the last N hours")."""
    everything = find_nondeterminism(stmt, dialect)
    relative: set[Finding] = set()
    for node in stmt.find_all(*_ARITHMETIC):
        relative.update(f for f in find_nondeterminism(node, dialect) if f.kind == "clock")
    relative.update(f for f in everything if _RELATIVE_MODIFIER.search(f.fragment))
    return [f for f in everything if f not in relative], [f for f in everything if f in relative]


def _high_water(stmt: exp.Insert, table: str, dialect: str) -> str | None:
    """`... WHERE ts > (SELECT MAX(ts) FROM target)`: the window comes from the target's contents."""
    for select in stmt.find_all(exp.Select):
        tables = {_table_name(t) for t in select.find_all(exp.Table)}
        found = select.find(exp.Max)
        if table in tables and found is not None and select is not stmt.expression:
            return f"{found.sql(dialect=dialect)} FROM {table}"
    return None


def _accumulating(stmt: exp.Update) -> str | None:
    """`points = points + ...` when an assignment adds to (or subtracts from) the column's own value."""
    for eq in stmt.expressions:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            continue
        column = eq.this.name.lower()
        for node in eq.expression.find_all(exp.Add, exp.Sub):
            if any(isinstance(c, exp.Column) and c.name.lower() == column for c in node.iter_expressions()):
                sign = "+" if isinstance(node, exp.Add) else "-"
                return f"{eq.this.name} = {eq.this.name} {sign} ..."
    return None


def sql_writes(sql: str, dialect: str | None = None) -> list[SqlWrite]:
    """The tables a SQL text writes and how (Jinja allowed), in statement order."""
    return [w for stmt in analyse_sql(sql, dialect).statements for w in stmt.writes]

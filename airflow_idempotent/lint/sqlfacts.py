"""What a SQL text does, read with sqlglot: the tables each statement writes and how, its clock reads.

`sql_writes` is the public question ("which tables does this SQL change, and how?"): the DAG linter
and the idempotency harness (to find a SQL task's targets) both ask it. Jinja expressions are
replaced by identifiers before parsing (`sqltext.prepare_sql`, keeping every line where it was) and
put back in what is reported; every fact carries the offset in the SQL text where it is written.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from sqlglot import exp

from airflow_idempotent.errors import SqlParseError
from airflow_idempotent.lint import benign, reloads
from airflow_idempotent.lint.clockroles import clock_role
from airflow_idempotent.lint.parsing import DIALECTS, FALLBACK_DIALECTS, START_KEY, parse_statements_at
from airflow_idempotent.lint.partitionfuncs import partition_writes
from airflow_idempotent.lint.sql import Finding, locate_nondeterminism
from airflow_idempotent.lint.sqlsets import accumulating, constant_sets, set_columns, target_names
from airflow_idempotent.lint.sqltext import Prepared, prepare_sql, restore_jinja
from airflow_idempotent.lint.tablefuncs import inserted_through

__all__ = [
    "ClockRead",
    "SqlFacts",
    "SqlStatement",
    "SqlWrite",
    "TableKeys",
    "analyse_sql",
    "sql_writes",
]

_RELATIVE_MODIFIER = re.compile(
    r"'\s*[+-]?\s*\d+(?:\.\d+)?\s*(?:second|minute|hour|day|week|month|year)s?\s*'", re.IGNORECASE
)
#: Date arithmetic some dialects spell as a function sqlglot leaves anonymous in others.
_DATE_ARITHMETIC_NAMES = frozenset(
    {
        "dateadd",
        "date_add",
        "date_sub",
        "datediff",
        "timestampadd",
        "timestamp_add",
        "timestamp_sub",
        "datetime_add",
        "datetime_sub",
        "adddate",
        "subdate",
        "add_months",
        "date_trunc",
    }
)


#: The write kinds (`SqlWrite.how`) that only take rows away: what a task clears before it fills.
REMOVING = frozenset({"delete", "truncate", "drop"})


@dataclass(frozen=True)
class SqlWrite:
    """A table a SQL statement changes, and how: the harness uses this to find a task's targets."""

    table: str
    how: str
    """overwrite, delete, truncate, replace, upsert, merge, keyed-insert, dedup, append, update,
    accumulate, create, drop"""
    detail: str
    #: where the write is written (offset in the SQL text): the statement, or the accumulating SET
    offset: int | None = None
    #: an INSERT .. VALUES' column list ("*" for all columns): a declared key among them fails a rerun
    columns: tuple[str, ...] = ()
    #: the columns an UPDATE or an upsert's DO UPDATE sets (empty: unknown, or the whole row)
    sets: tuple[str, ...] = ()
    #: an UPDATE that sets only literals (a flag or lock: a rerun writes the same values)
    constant: bool = False


@dataclass(frozen=True)
class ClockRead:
    """A read of the clock, randomness or a sequence, where it is, and what it does."""

    finding: Finding
    offset: int | None
    relative: bool  # shifted by a span: "the last N hours"
    filtering: bool  # in WHERE / JOIN / HAVING: it decides which rows the window is
    column: str | None = None  # the column the read is written to, when it is that value itself
    cutoff: bool = False  # shifted, and only the upper bound of a column: "older than N" (retention)
    tableless: bool = False  # the statement is a SELECT of no table (``SELECT GETDATE()``)
    age: bool = False  # clock minus a column in the output: days since a row's date (`benign.age_of`)
    #: what the read decides (`clockroles`, round 36c): its value is a day or coarser period, a week
    #: or coarser, the column that value is written to, and an equality with a row's date
    period: bool = False
    coarse: bool = False
    labels: str | None = None
    day_match: str | None = None


@dataclass(frozen=True)
class TableKeys:
    """A table's declared keys (PRIMARY KEY, UNIQUE) and the columns the database numbers itself."""

    table: str
    keys: tuple[tuple[str, ...], ...]
    generated: frozenset[str]
    #: its engine keeps one row per key whatever is inserted again (ClickHouse Set, ReplacingMergeTree)
    dedups: bool = False


@dataclass
class SqlStatement:
    """One statement: its kind, where it starts, what it writes, its clock reads and parameters."""

    kind: str
    offset: int | None
    writes: list[SqlWrite] = field(default_factory=list)
    reads: list[ClockRead] = field(default_factory=list)
    placeholders: list[str] = field(default_factory=list)
    high_water: str | None = None
    high_water_offset: int | None = None
    key: str | None = None
    declared: TableKeys | None = None
    #: tables a SELECT reads MAX(..) of: a high-water mark another task may be handed
    max_of: list[str] = field(default_factory=list)
    #: tables whose not-yet-marked rows a SELECT reads (``WHERE processed_at IS NULL``): a queue
    pending: list[str] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)  # ``table.column`` compared by order or MAX'd
    #: tables it empties whole (empty slice) or of a constant slice; literals it writes; first row kept
    replaced: dict[str, reloads.Slice] = field(default_factory=dict)
    constants: reloads.Slice = ()
    keeps_first: bool = False
    only_missing: bool = False  # an anti-join on its own target (`reloads.inserts_missing`)
    unloads: str | None = None  # the file a COPY .. TO writes its rows to


@dataclass
class SqlFacts:
    """A SQL text's statements, the dialect that read them (or the parse error) and its Jinja."""

    statements: list[SqlStatement]
    dialect: str | None
    error: str | None
    jinja: list[str]
    jinja_at: list[int] = field(default_factory=list)


@contextlib.contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


Parsed = list[tuple[exp.Expression, int | None]]


def _parse_any(sql: str, dialects: Sequence[str]) -> tuple[Parsed, str | None, str | None]:
    """Parse with the first dialect that reads every statement; else each `;`-chunk on its own."""
    error: str | None = None
    with _quiet_sqlglot():
        for dialect in dialects:
            try:
                return parse_statements_at(sql, dialect), dialect, None
            except SqlParseError as err:
                error = error or str(err)
        statements: Parsed = []
        at = 0
        for chunk in sql.split(";"):
            begin, at = at, at + len(chunk) + 1
            if not chunk.strip():
                continue
            for dialect in dialects:
                try:
                    found = parse_statements_at(chunk, dialect)
                except SqlParseError:
                    continue
                statements.extend((stmt, begin + (start or 0)) for stmt, start in found)
                break
    return statements, (dialects[0] if statements else None), error


def analyse_sql(sql: str, dialect: str | None) -> SqlFacts:
    """Every statement of `sql` (in `dialect`, else the first dialect that reads it) and its facts,
    with offsets into `sql` itself."""
    prepared = prepare_sql(sql)
    dialects = (dialect,) if dialect else (*DIALECTS, *FALLBACK_DIALECTS)
    statements, used, error = _parse_any(prepared.text, dialects)
    facts = SqlFacts([], used, error if not statements else None, prepared.jinja, prepared.jinja_at)
    if not statements:
        facts.statements.extend(_fallback_statements(prepared))
        return facts
    assert used is not None
    for stmt, start in statements:
        one = _statement(stmt, start, used)
        one.offset = prepared.original(one.offset)
        one.high_water_offset = prepared.original(one.high_water_offset)
        one.writes = [
            SqlWrite(
                restore_jinja(w.table, prepared.jinja),
                w.how,
                restore_jinja(w.detail, prepared.jinja),
                prepared.original(w.offset),
                w.columns,
                w.sets,
                w.constant,
            )
            for w in one.writes
        ]
        one.reads = [replace(r, offset=prepared.original(r.offset)) for r in one.reads]
        facts.statements.append(one)
    return facts


def _fallback_statements(prepared: Prepared) -> list[SqlStatement]:
    """Statements sqlglot cannot read (e.g. MySQL's REPLACE INTO): classified by their first words."""
    out: list[SqlStatement] = []
    pattern = re.compile(r"(?:^|;)\s*(replace|insert)\s+(?:ignore\s+)?into\s+([\w.`\"]+)", re.IGNORECASE)
    for match in pattern.finditer(prepared.text):
        table = match.group(2).replace("`", "").replace('"', "").lower()
        offset = prepared.original(match.start(1))
        if (through := inserted_through(prepared.text, match.start(1))) is not None:
            out.append(_through(through, offset))
            continue
        if match.group(1).lower() == "replace":
            write = SqlWrite(table, "replace", f"REPLACE INTO {table}", offset)
        else:
            write = SqlWrite(table, "append", f"INSERT INTO {table}", offset)
        out.append(SqlStatement(match.group(1).lower(), offset, [write]))
    return out


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
_DDL: tuple[type[exp.Expression], ...] = tuple(
    cls
    for name in ("Alter", "AlterTable", "Command", "Drop", "Transaction", "Commit", "Rollback", "Set", "Use")
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


def _copy_target(stmt: exp.Copy) -> str | None:
    """The table a COPY loads, or None when it unloads into a stage or a location."""
    table = _table_name(stmt.this)
    return table if table and not table.startswith("@") and "://" not in table else None


def _same_table(a: str | None, b: str) -> bool:
    """`a` names table `b` (one of them may leave out the schema)."""
    if a is None:
        return False
    return a == b or (a.split(".")[-1] == b.split(".")[-1] and ("." not in a or "." not in b))


def _position(node: exp.Expression | None) -> int | None:
    """The source offset the parser recorded for a node (or its first identifier)."""
    if node is None:
        return None
    for sub in node.walk():
        start = sub.meta.get(START_KEY, sub.meta.get("start"))
        if isinstance(start, int):
            return start
    return None


def _statement(stmt: exp.Expression, start: int | None, dialect: str) -> SqlStatement:
    result = SqlStatement(type(stmt).__name__.lower(), start if start is not None else _position(stmt))
    result.placeholders = sorted({p.name for p in stmt.find_all(exp.Placeholder) if p.name})
    result.marks = benign.marks_read(stmt)
    if isinstance(stmt, exp.Select | exp.Union):
        result.pending = benign.pending_tables(stmt)
    elif isinstance(stmt, exp.Insert) and isinstance(stmt.expression, exp.Select | exp.Union):
        result.pending = benign.pending_tables(stmt.expression)  # INSERT .. SELECT .. WHERE flag = false
    data: exp.Expression | None = stmt
    if isinstance(stmt, exp.Create):
        data = _create(stmt, result)
    elif isinstance(stmt, exp.Alter) and (delete := _alter_delete(stmt, dialect)) is not None:
        result.writes.append(SqlWrite(delete[0], "delete", delete[1], result.offset))
    elif isinstance(stmt, _DDL):
        data = None
        if isinstance(stmt, exp.Drop) and (stmt.args.get("kind") or "").upper() == "TABLE":
            for t in stmt.args.get("tables") or [stmt.this]:
                if (name := _table_name(t)) is not None:
                    result.writes.append(SqlWrite(name, "drop", f"DROP TABLE {name}", result.offset))
    elif isinstance(stmt, exp.Copy) and stmt.args.get("kind") and (table := _copy_target(stmt)):
        # COPY .. FROM (Snowflake's COPY INTO t FROM @stage, Postgres/Redshift COPY t FROM ..): a load
        # that adds the files' rows (Snowflake skips a file it loaded unchanged, not one PUT again)
        result.writes.append(SqlWrite(table, "append", f"COPY INTO {table}", result.offset))
    elif isinstance(stmt, exp.Copy) and not stmt.args.get("kind") and stmt.args.get("files"):
        result.unloads = stmt.args["files"][0].sql(dialect=dialect)  # COPY (SELECT ..) TO 'file'
    elif isinstance(stmt, exp.Insert):
        _insert(stmt, result, dialect)
    elif isinstance(stmt, exp.Merge):
        _merge(stmt, result, dialect)
    elif isinstance(stmt, exp.Delete):
        table = _table_name(stmt.this)
        if table:
            where = stmt.args.get("where")
            detail = f"DELETE FROM {table}" + (f" {where.sql(dialect=dialect)}" if where else "")
            result.writes.append(SqlWrite(table, "delete", detail, result.offset))
    elif isinstance(stmt, exp.TruncateTable):
        for t in stmt.expressions:
            if (name := _table_name(t)) is not None:
                result.writes.append(SqlWrite(name, "truncate", f"TRUNCATE {name}", result.offset))
    elif isinstance(stmt, exp.Update):
        target = _update_target(stmt)
        table = _table_name(target)
        if table:
            found = accumulating(stmt.expressions, target_names(target, table), stmt.args.get("where"))
            sets = set_columns(stmt.expressions)
            if found:
                result.writes.append(
                    SqlWrite(table, "accumulate", f"UPDATE {table} SET {found}", result.offset, sets=sets)
                )
            else:
                constant = constant_sets(stmt.expressions) and not stmt.args.get("from_")
                update = SqlWrite(
                    table, "update", f"UPDATE {table}", result.offset, sets=sets, constant=constant
                )
                result.writes.append(update)
    elif isinstance(stmt, exp.Select | exp.Union):
        for table, how, detail in partition_writes(stmt):
            result.writes.append(SqlWrite(table, how, detail, result.offset))
        for select in stmt.find_all(exp.Select):
            if any(isinstance(e, exp.Max) or e.find(exp.Max) for e in select.expressions):
                result.max_of.extend(t for t in (_table_name(x) for x in select.find_all(exp.Table)) if t)
    if data is not None:
        result.reads = _clock_reads(data, dialect)
    result.replaced = reloads.replaced_by(stmt, ((w.table, w.how) for w in result.writes))
    result.constants, result.keeps_first = reloads.constants_written(stmt), reloads.keeps_first(stmt, dialect)
    result.only_missing = reloads.inserts_missing(stmt)
    return result


def _update_target(stmt: exp.Update) -> exp.Expression:
    """The table an UPDATE writes. T-SQL's ``UPDATE c SET .. FROM [s].[t] AS c JOIN ..`` names an alias
    of its FROM clause, not a table: the write is to ``s.t`` (three such updates of three tables are
    not one table ``c`` written three times)."""
    this = stmt.this
    source = stmt.args.get("from_")
    if not isinstance(this, exp.Table) or this.args.get("db") or source is None:
        return this
    for table in source.find_all(exp.Table):
        if table.alias and table.alias.lower() == this.name.lower() and table is not this:
            return table
    return this


def _alter_delete(stmt: exp.Alter, dialect: str) -> tuple[str, str] | None:
    """ClickHouse's ``ALTER TABLE t DELETE WHERE ..`` (a mutation): the table and the write's text."""
    table = _table_name(stmt.this)
    action = next((a for a in stmt.args.get("actions") or [] if isinstance(a, exp.Delete)), None)
    if table is None or action is None:
        return None
    where = action.args.get("where")
    return table, f"ALTER TABLE {table} DELETE" + (f" {where.sql(dialect=dialect)}" if where else "")


def _create(stmt: exp.Create, result: SqlStatement) -> exp.Expression | None:
    """CREATE: a table's declared keys, a CREATE TABLE AS's write; only its query reads anything."""
    if stmt.args.get("kind") != "TABLE":
        return None
    table = _table_name(stmt.this)
    query = stmt.args.get("expression")
    if table and stmt.args.get("replace"):
        result.writes.append(SqlWrite(table, "replace", f"CREATE OR REPLACE TABLE {table}", result.offset))
    elif table and isinstance(query, exp.Query):
        result.writes.append(SqlWrite(table, "create", f"CREATE TABLE {table} AS SELECT", result.offset))
    if table and isinstance(stmt.this, exp.Schema):
        keys = _declared_keys(table, stmt.this)
        result.declared = TableKeys(keys.table, keys.keys, keys.generated, benign.dedup_engine(stmt))
    return query if isinstance(query, exp.Expression) and isinstance(query, exp.Query) else None


def _declared_keys(table: str, schema: exp.Schema) -> TableKeys:
    keys: list[tuple[str, ...]] = []
    generated: set[str] = set()
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            name = item.name.lower()
            kind = item.args.get("kind")
            if isinstance(kind, exp.DataType) and "SERIAL" in str(kind.this).upper():
                generated.add(name)
            for constraint in item.args.get("constraints") or []:
                ckind = constraint.args.get("kind")
                if isinstance(ckind, exp.PrimaryKeyColumnConstraint | exp.UniqueColumnConstraint):
                    keys.append((name,))
                if type(ckind).__name__ in (
                    "GeneratedAsIdentityColumnConstraint",
                    "AutoIncrementColumnConstraint",
                ):
                    generated.add(name)
        elif isinstance(item, exp.PrimaryKey):
            keys.append(tuple(e.name.lower() for e in item.expressions))
        elif isinstance(item, exp.UniqueColumnConstraint) and isinstance(item.this, exp.Schema):
            keys.append(tuple(e.name.lower() for e in item.this.expressions))
    return TableKeys(table, tuple(keys), frozenset(generated))


def _through(written: tuple[str | None, str | None], offset: int | None) -> SqlStatement:
    """An insert through a ClickHouse table function (`tablefuncs`): into a remote table, or a file."""
    table, file = written
    one = SqlStatement(
        "insert", offset, [SqlWrite(table, "append", f"INSERT INTO {table}", offset)] if table else []
    )
    one.unloads = file
    return one


def _insert(stmt: exp.Insert, result: SqlStatement, dialect: str) -> None:
    table = _table_name(stmt.this)
    if table is None:
        if isinstance(stmt.this, exp.Anonymous):  # INSERT INTO FUNCTION s3(..) (ClickHouse)
            written = inserted_through(f"insert into function {stmt.this.sql()}", 0)
            through = _through(written or (None, None), result.offset)
            result.writes, result.unloads = through.writes, through.unloads
        return
    at = result.offset
    conflict = stmt.args.get("conflict")
    if isinstance(conflict, exp.OnConflict):
        keys = conflict.args.get("conflict_keys") or []
        key = ", ".join(re.sub(r" NULLS (LAST|FIRST)$", "", k.sql()) for k in keys) if keys else None
        style = "ON DUPLICATE KEY UPDATE" if conflict.args.get("duplicate") else "ON CONFLICT"
        result.key = key
        assignments = conflict.args.get("expressions") or []
        found = accumulating(assignments, target_names(stmt.this, table))
        sets = set_columns(assignments)
        if found:
            detail = f"INSERT INTO {table} .. {style} {found}"
            result.writes.append(SqlWrite(table, "accumulate", detail, at, sets=sets))
        else:
            detail = f"INSERT INTO {table} .. {style}" + (f" ({key})" if key else "")
            result.writes.append(SqlWrite(table, "upsert", detail, at, sets=sets))
    elif stmt.args.get("overwrite"):
        result.writes.append(SqlWrite(table, "replace", f"INSERT OVERWRITE {table}", at))
    elif (stmt.args.get("alternative") or "").upper() == "REPLACE":
        result.writes.append(SqlWrite(table, "replace", f"INSERT OR REPLACE INTO {table}", at))
    elif stmt.args.get("ignore") or (stmt.args.get("alternative") or "").upper() == "IGNORE":
        result.writes.append(SqlWrite(table, "keyed-insert", f"INSERT IGNORE INTO {table}", at))
    elif _dedup(stmt, table):
        result.writes.append(
            SqlWrite(table, "dedup", f"INSERT INTO {table} of the rows it does not have yet", at)
        )
    else:
        columns: tuple[str, ...] = ()
        if isinstance(stmt.expression, exp.Values):
            listed = stmt.this.expressions if isinstance(stmt.this, exp.Schema) else []
            columns = tuple(c.name.lower() for c in listed) or ("*",)
        result.writes.append(SqlWrite(table, "append", f"INSERT INTO {table}", at, columns))
    mark = _high_water(stmt, table, dialect)
    if mark is not None:
        result.high_water, result.high_water_offset = mark


def _merge(stmt: exp.Merge, result: SqlStatement, dialect: str) -> None:
    table = _table_name(stmt.this)
    if not table:
        return
    on = stmt.args.get("on")
    result.key = on.sql(dialect=dialect) if isinstance(on, exp.Expression) else None
    names = target_names(stmt.this, table)
    for when in stmt.find_all(exp.When):
        then = when.args.get("then")
        if isinstance(then, exp.Update):
            found = accumulating(then.expressions, names)
            if found:
                detail = f"MERGE INTO {table} .. WHEN MATCHED THEN UPDATE SET {found}"
                result.writes.append(SqlWrite(table, "accumulate", detail, result.offset))
                return
    result.writes.append(SqlWrite(table, "merge", f"MERGE INTO {table} ON {result.key}", result.offset))


def _dedup(stmt: exp.Insert, table: str) -> bool:
    """The INSERT skips rows the target already has: ``NOT EXISTS (SELECT .. FROM target ..)``,
    ``NOT IN (SELECT .. FROM target)``, ``LEFT JOIN target t .. WHERE t.x IS NULL``, ``EXCEPT``; also
    inside a CTE of the INSERT (T-SQL's ``WITH c AS (.. LEFT JOIN target t .. WHERE t.x IS NULL)
    INSERT INTO target .. FROM c``), where the rows the target lacks are chosen one step away."""
    if not isinstance(stmt.expression, exp.Expression):
        return False
    ctes = stmt.args.get("with_")
    return any(
        _skips_held(query, table)
        for query in (stmt.expression, *(c.this for c in (ctes.expressions if ctes else [])))
    )


def _skips_held(query: exp.Expression, table: str) -> bool:
    """`query` keeps only rows `table` does not hold (`_dedup`'s shapes)."""

    def reads_target(node: exp.Expression | None) -> bool:
        return node is not None and any(_same_table(_table_name(t), table) for t in node.find_all(exp.Table))

    for node in query.find_all(exp.Exists, exp.In):
        subquery = node if isinstance(node, exp.Exists) else node.args.get("query")
        if isinstance(node.parent, exp.Not) and reads_target(subquery):
            return True
    for join in query.find_all(exp.Join):
        joined = join.this
        if (join.side or "").upper() == "LEFT" and isinstance(joined, exp.Table) and reads_target(joined):
            alias = (joined.alias or joined.name).lower()
            select = join.find_ancestor(exp.Select)
            where = select.args.get("where") if select is not None else None
            if where is not None:
                for is_null in where.find_all(exp.Is):
                    col = is_null.this
                    if (
                        isinstance(col, exp.Column)
                        and col.table.lower() == alias
                        and isinstance(is_null.expression, exp.Null)
                    ):
                        return True
    return any(reads_target(e.expression) for e in query.find_all(exp.Except))


def _clock_reads(root: exp.Expression, dialect: str) -> list[ClockRead]:
    """The clock (randomness, sequence) reads under `root`: shifted by a span or not, filtering or not."""
    reads: list[ClockRead] = []
    bare = isinstance(root, exp.Select) and not root.args.get("from_")
    for offset, finding, node in locate_nondeterminism(root, dialect):
        if finding.kind == "random" and _only_orders(node):
            continue  # ORDER BY random() with no LIMIT: the same rows, in another order
        relative = finding.kind == "clock" and (
            node.find_ancestor(*_ARITHMETIC) is not None
            or _in_date_function(node)
            or bool(_RELATIVE_MODIFIER.search(finding.fragment))
        )
        filtering = node.find_ancestor(exp.Where, exp.Join, exp.Having) is not None
        cutoff, written = relative and benign.older_than(node), benign.written_column(node)
        age = finding.kind == "clock" and benign.age_of(node)
        role = clock_role(node)
        reads.append(
            ClockRead(
                finding,
                offset,
                relative,
                filtering,
                written,
                cutoff,
                bare,
                age,
                role.period,
                role.coarse,
                role.column,
                role.day_match,
            )
        )
    return reads


def _only_orders(node: exp.Expression) -> bool:
    """`node` is in a query's ORDER BY and the query takes no LIMIT / TOP / FETCH: it orders the rows
    a statement writes or exports, and does not choose them."""
    order = node.find_ancestor(exp.Order)
    query = order.parent if order is not None else None
    return isinstance(query, exp.Select) and not (query.args.get("limit") or query.args.get("fetch"))


def _in_date_function(node: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Anonymous) and parent.name.lower() in _DATE_ARITHMETIC_NAMES - {
            "date_trunc"
        }:
            return True
        if isinstance(parent, exp.Select):
            return False
        parent = parent.parent
    return False


def _high_water(stmt: exp.Insert, table: str, dialect: str) -> tuple[str, int | None] | None:
    """`... WHERE ts > (SELECT MAX(ts) FROM target)`: the window comes from the target's contents."""
    for select in stmt.find_all(exp.Select):
        tables = {_table_name(t) for t in select.find_all(exp.Table)}
        found = select.find(exp.Max)
        if table in tables and found is not None and select is not stmt.expression:
            return f"{found.sql(dialect=dialect)} FROM {table}", _position(found)
    return None


def sql_writes(sql: str, dialect: str | None = None) -> list[SqlWrite]:
    """The tables a SQL text writes and how (Jinja allowed), in statement order."""
    return [w for stmt in analyse_sql(sql, dialect).statements for w in stmt.writes]

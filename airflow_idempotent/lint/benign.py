"""Shapes where a rule's condition holds but a rerun is safe: reported as information, not failed.

Measured on public DAG repositories (docs/lint-evaluation.md, issue 35): most of what reviewers
would not act on was one of these. Each is a syntactic test on a name or a sqlglot node; the checks
decide what to do with it (`sqlchecks`, `checks`).
"""

from __future__ import annotations

import re

from sqlglot import exp

__all__ = [
    "AUDIT_COLUMN",
    "LOAD_STAMP",
    "NOTE_COLUMN",
    "RECORD_TABLE",
    "RETRY_COUNTER",
    "STAMP_NAME",
    "age_of",
    "dedup_engine",
    "marks_read",
    "older_than",
    "pending_tables",
    "stamp_column",
    "written_column",
]

#: The last part of a table's name saying it records each check or version: a verification result or
#: a history (``cdc_data_verifi_log``, ``tb_data_verify``, ``products_history``,
#: ``lifetime_historical``). Round 36k: on rounds 28-48, every append into such a table was labelled
#: harmless (a rerun adds its own record, which the table keeps by design); the useful appends were
#: into tables named for data (``*_snapshot``, ``fact_*``, ``*_real``). A bare ``*_log`` or ``audit``
#: stays a finding (earlier rounds' tests append to run logs as data).
RECORD_TABLE = re.compile(r"(?:^|_)(?:verif[a-z]*|verify|history|historical)(?:$|_)", re.IGNORECASE)

#: A column that records when a row was last touched (``updated_at = now()``): the clock in it does
#: not change which rows a window holds or any value a report reads. Columns recording when a row
#: was *loaded* (``loaded_at``) are not audit columns here: a snapshot's rows carry them as data.
#: Round 21: the present tense with a time word too (``update_time``, ``modify_date``, eft-library's
#: upserted rows) and ``last_update`` (``last_folio_update`` too, round 21 follow-up); a bare
#: ``update`` or ``price_update`` is no stamp.
AUDIT_COLUMN = re.compile(
    r"(?:^|_)(?:(?:last_)?(?:updated|modified|changed|touched|synced|processed|refreshed|expires|expired)"
    r"(?:_?(?:at|on|ts|time|timestamp|tmstmp|date|dt|dttm))?"
    r"|last_(?:[a-z0-9]+_)?update|(?:update|modify|modification)_?(?:at|on|ts|time|timestamp|tmstmp|date|dt)"
    # a warehouse's abbreviated audit pair (round 36b: rrap's UPDT_PROCESS_TMSTMP beside INSRT_..)
    r"|(?:updt|upd)_(?:process_|proc_|etl_|dw_)?(?:ts|tmstmp|tstmp|timestamp|dttm)"
    # Spanish, Portuguese, French (round 22: smu-chile's ``fecha_actualizacion = CURRENT_TIMESTAMP``)
    r"|(?:fecha|fec|data|dt|date)_(?:de_|da_)?(?:actualizacion|modificacion|atualizacao|modificacao|alteracao"
    r"|maj|mise_a_jour|modification))$",
    re.IGNORECASE,
)

#: A column named for when something was done to the row (``loaded_at``, ``inserted_ts``,
#: ``created_at``, ``etl_date``; a bare ``created``, round 21 follow-up): a stamp of the write itself.
#: Written the clock's value on rows a task writes by key or window, a rerun re-stamps the same rows
#: (`stamps` decides; not on an append). Round 27c: ``dttm`` too (``msk_record_loaded_dttm``, a Russian
#: DWH's spelling of a datetime suffix, profcomff's MERGE). Round 36b: a warehouse's abbreviations
#: (``INSRT_PROCESS_TMSTMP``, ``process_ts``) and a date word first (``date_converted``, ``dt_loaded``);
#: ``process_date`` alone stays data (the day a run processes).
LOAD_STAMP = re.compile(
    r"(?:^|_)(?:[a-z]+ed|load|insert|insrt|instr|ingest|etl|dwh?)_?"
    r"(?:process_|proc_)?(?:at|on|ts|time|timestamp|tmstmp|tstmp|date|dt|dttm|datetime)$"
    r"|(?:^|_)process_(?:ts|tmstmp|tstmp|timestamp|dttm)$"
    r"|^(?:date|dt|ts|time|timestamp)_[a-z]+ed$|^created$",
    re.IGNORECASE,
)


def stamp_column(column: str | None) -> bool:
    """`column` (a SQL column, or a record's field written as one: `docstamps`) is named for when
    something was done to the row: an audit column or a load stamp."""
    return column is not None and bool(AUDIT_COLUMN.search(column) or LOAD_STAMP.search(column))


#: A Python name (variable, keyword, dict key, attribute) that says its value is a stamp of when a
#: record was written (``loaded_at``, ``ts``, ``fetched``, ``createdAt``), for `sinks`, which follows a
#: clock value through Python code and adds its own names of timers, logs and messages. Looser than
#: `stamp_column` on purpose: any ``_``-separated word of the name counts, case-sensitive, camelCase
#: too; a date word (``date``, ``dt``) is data there, not a stamp (lint46's labels).
STAMP_NAME = re.compile(
    r"(^|_)(at|ts|time|times|timestamp|stamp|stamped|created|updated|modified|inserted|loaded|"
    r"processed|ingested|ingestion|fetched|scraped|harvested|observed|written|last_update|"
    r"tmstmp|TMSTMP|TS|TIMESTAMP)($|_)"
    r"|^(created|updated|modified)[A-Z]|At$|Time$|Date$",
)

#: A counter of attempts or errors (``attempts = attempts + 1``): counting reruns is its purpose.
RETRY_COUNTER = re.compile(
    r"(?:attempt|retr(?:y|ies)|tries|try_count|error_count|errors|failures|fail_count"
    r"|intentos|tentativas|tentatives)",  # Spanish, Portuguese, French (smu-chile's ``intentos_vtex``)
    re.IGNORECASE,
)

#: Columns that annotate a row rather than hold its data: text appended to them (``comments =
#: comments || ' | Duplicate'``, ``processingflag || '_bbl2bin'``) is a log of what a step did, so a
#: rerun repeats a note, never a value (round 18: ilri's QA checks, NYCPlanning's FacDB trace).
NOTE_COLUMN = re.compile(
    r"(?:comment|note|remark|warning|error|message|log|flag|trace|status)s?$", re.IGNORECASE
)

#: ClickHouse engines that keep one row per key (or set member) whatever is inserted again.
_DEDUP_ENGINES = frozenset(
    {"set", "join", "replacingmergetree", "collapsingmergetree", "versionedcollapsingmergetree"}
)


def dedup_engine(create: exp.Create) -> bool:
    """The CREATE TABLE declares an engine that deduplicates (ClickHouse ``Set``, ``ReplacingMergeTree``
    and their replicated variants): inserting the same rows again adds nothing a query sees."""
    properties = create.args.get("properties")
    if properties is None:
        return False
    for prop in properties.expressions:
        if isinstance(prop, exp.EngineProperty):
            name = prop.this.name if isinstance(prop.this, exp.Expression) else str(prop.this)
            name = name.lower().removeprefix("replicated")
            if name in _DEDUP_ENGINES or f"replicated{name}" in _DEDUP_ENGINES:
                return True
    return False


def written_column(node: exp.Expression) -> str | None:
    """The column a value is written to when `node` is that value itself (not part of an
    expression): ``SET col = node``, ``node AS col`` in a SELECT list, or by position in an INSERT's
    column list (``INSERT INTO t (a, b) VALUES (x, node)`` / ``.. SELECT x, node``; a MERGE's ``WHEN NOT
    MATCHED THEN INSERT (a, b) VALUES (x, node)`` too, round 27c). A conversion of
    the value (``now() AT TIME ZONE 'utc'``, a CAST, or a format: ``date_format(current_timestamp,
    'yyyy-MM-dd HH:mm:ss') AS insrt_process_tmstmp``, round 36b) is still that value."""
    while isinstance(up := node.parent, exp.Expression) and _converts(up, node):
        node = up
    parent = node.parent
    if isinstance(parent, exp.Alias):
        return parent.alias or None
    if isinstance(parent, exp.EQ) and parent.expression is node and isinstance(parent.this, exp.Column):
        holder = parent.parent
        if isinstance(holder, exp.Update | exp.OnConflict) or holder is None:
            return parent.this.name
        if isinstance(holder, exp.Tuple | exp.Set) or holder.find_ancestor(exp.Update, exp.OnConflict):
            return parent.this.name
    insert = node.find_ancestor(exp.Insert)
    if insert is None:
        return None
    merge_insert = isinstance(insert.this, exp.Tuple) and parent is insert.expression  # INSERT (cols) VALUES
    if not (isinstance(insert.this, exp.Schema) or merge_insert):
        return None
    columns = [c.name for c in insert.this.expressions]
    row = parent
    if isinstance(row, exp.Tuple | exp.Select) and node in row.expressions:
        at = row.expressions.index(node)
        return columns[at] if at < len(columns) else None
    return None


#: functions that format a time value as text (their first argument), read as the value itself
_FORMATS = frozenset({"date_format", "strftime", "to_char", "format_timestamp", "format_datetime", "format"})


def _converts(parent: exp.Expression, node: exp.Expression) -> bool:
    """`parent` only converts `node` (a time zone, a cast, a format of it as text)."""
    if isinstance(parent, exp.AtTimeZone | exp.Cast | exp.TryCast | exp.TimeToStr):
        return parent.this is node
    if isinstance(parent, exp.Anonymous) and parent.name.lower() in _FORMATS:
        return bool(parent.expressions) and parent.expressions[0] is node
    return False


def pending_tables(select: exp.Expression) -> list[str]:
    """Tables whose rows a SELECT takes only while a column of theirs is still NULL or false (``WHERE
    t.processed_at IS NULL``, ``WHERE trees.cluster_regions_assigned = false``): the rows not yet
    marked done. With an UPDATE of that table in the same task, what the task inserts for them is
    drained from a queue, not appended per window."""
    out: list[str] = []
    for query in select.find_all(exp.Select):
        where = query.args.get("where")
        if where is None:
            continue
        tables = {t.alias_or_name.lower(): t for t in query.find_all(exp.Table)}
        for column in _unmarked_columns(where):
            owner = tables.get(column.table.lower()) if column.table else None
            if owner is None and len(tables) == 1:
                owner = next(iter(tables.values()))
            if owner is not None:
                name = ".".join(p for p in (owner.db, owner.name) if p).lower()
                if name not in out:
                    out.append(name)
    return out


def _unmarked_columns(where: exp.Expression) -> list[exp.Column]:
    """The columns a WHERE requires to be unset: ``c IS NULL``, ``c = false`` (or ``= 0``)."""
    out: list[exp.Column] = []
    for is_null in where.find_all(exp.Is):
        unset = isinstance(is_null.expression, exp.Null) and not isinstance(is_null.parent, exp.Not)
        if unset and isinstance(is_null.this, exp.Column):
            out.append(is_null.this)
    for equal in where.find_all(exp.EQ):
        column, value = equal.this, equal.expression
        if isinstance(value, exp.Column) and not isinstance(column, exp.Column):
            column, value = value, column
        unset = (isinstance(value, exp.Boolean) and not value.this) or (
            isinstance(value, exp.Literal) and not value.is_string and value.this == "0"
        )
        if isinstance(column, exp.Column) and unset and not isinstance(equal.parent, exp.Not):
            out.append(column)
    return out


def older_than(node: exp.Expression) -> bool:
    """The clock read is the upper bound of a column: ``created_at < now() - interval '30 days'``
    (or ``now() - .. > created_at``): rows older than a cutoff, as retention, archival or expiry
    select them. A late run selects as much or more, and what one run leaves the next one takes: no
    window is missed (a lower bound, ``>= now() - ..``, is "the last N" and stays IDEM004)."""
    compare = node.find_ancestor(exp.LT, exp.LTE, exp.GT, exp.GTE)
    if compare is None or compare.find_ancestor(exp.Where, exp.Join, exp.Having) is None:
        return False
    on_right = any(n is node for n in compare.expression.walk())
    column = compare.this if on_right else compare.expression
    upper = isinstance(compare, exp.LT | exp.LTE) if on_right else isinstance(compare, exp.GT | exp.GTE)
    return upper and isinstance(column, exp.Column)


def age_of(node: exp.Expression) -> bool:
    """The clock read, shifted or not, minus a column, in a query's output and no predicate:
    ``CURRENT_DATE - last_active::date`` counts the days since a row's date (an age shown in an
    alert's text), where "now minus a span" would be the bound of a window. A value of the row it is
    computed for: it chooses no rows (round 28: two outage checks' "(N days)" in their Slack text)."""
    if node.find_ancestor(exp.Where, exp.Join, exp.Having) is not None:
        return False
    child: exp.Expression = node
    parent = node.parent
    while isinstance(parent, exp.Add | exp.Sub | exp.Paren):
        if isinstance(parent, exp.Sub) and parent.this is child:
            other = parent.expression
            while isinstance(other, exp.Cast | exp.Paren):
                other = other.this
            if isinstance(other, exp.Column):
                return True
        child, parent = parent, parent.parent
    return False


def marks_read(stmt: exp.Expression) -> list[str]:
    """``table.column`` for each column a statement reads as a mark: compared by order in a WHERE,
    JOIN or HAVING (``loaded_at > '{{ prev_ds }}'``, ``loaded_at >= ..``, BETWEEN) or taken the MAX of
    (not a MAX only matched by equality, the newest stamp's rows: `_newest_rows`).
    A stamp written there decides what an increment reading it selects (`stamps`). A column without
    a table (several tables, no qualifier) is given as ``?.column``. Each read is taken in its own
    statement or subquery, whose tables an unqualified column names (round 27c: profcomff's ``ud.modified =
    (SELECT MAX(modified) FROM student_id)`` is student_id's, not any table's)."""
    out: list[str] = []
    every = {t.alias_or_name.lower(): t for t in stmt.find_all(exp.Table)}  # a correlated alias
    for select in stmt.find_all(exp.Select, exp.Update, exp.Delete):
        tables = {t.alias_or_name.lower(): t for t in select.find_all(exp.Table)}
        own = [t for t in tables.values() if _scope_of(t) is select] or list(tables.values())
        columns = [
            m.this
            for m in select.find_all(exp.Max)
            if isinstance(m.this, exp.Column) and _scope_of(m) is select and not _newest_rows(select, m.this)
        ]
        for compare in select.find_all(exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between):
            if (
                compare.find_ancestor(exp.Where, exp.Join, exp.Having) is not None
                and _scope_of(compare) is select
            ):
                columns.extend(c for c in (compare.this, compare.expression) if isinstance(c, exp.Column))
        for column in columns:
            owner = (
                (tables.get(column.table.lower()) or every.get(column.table.lower()))
                if column.table
                else None
            )
            if owner is None and not column.table and len(own) == 1:
                owner = own[0]
            name = ".".join(p for p in (owner.db, owner.name) if p).lower() if owner is not None else "?"
            if f"{name}.{column.name.lower()}" not in out:
                out.append(f"{name}.{column.name.lower()}")
    return out


def _newest_rows(select: exp.Expr, column: exp.Column) -> bool:
    """`select` is ``(SELECT MAX(col) ..)`` compared by equality with a column of the same name
    (``ud.modified = (SELECT MAX(modified) FROM t)``): the reader takes the rows of the newest stamp,
    all the rows one write stamped. A rerun re-stamps those same rows, so the reader takes them again;
    no row falls out of a window behind a mark (lint35: profcomff's member list, round 27's batch). A
    MAX compared by order (``src.modified > (SELECT MAX(modified) ..)``) or read on its own stays a mark."""
    subquery = select.parent
    if not isinstance(subquery, exp.Subquery) or not isinstance(subquery.parent, exp.EQ):
        return False
    equal = subquery.parent
    other = equal.this if equal.expression is subquery else equal.expression
    return isinstance(other, exp.Column) and other.name.lower() == column.name.lower()


def _scope_of(node: exp.Expr) -> exp.Expr | None:
    """The statement or subquery `node` is read in (its nearest SELECT, UPDATE or DELETE)."""
    return node.find_ancestor(exp.Select, exp.Update, exp.Delete)

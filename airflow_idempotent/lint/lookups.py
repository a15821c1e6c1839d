"""Inserts a helper runs only when a lookup of the same table found no row ("get or create" in SQL).

``if not site_is_known(site_id, conn): insert_site(conn, site_id, ..)``, or ``found = get_row(curs,
table, key)`` then ``if found: update(..) else: create(..)``: the lookup is a repository function that
SELECTs from a table, and the insert the guarded helper runs goes into that table. A rerun finds the
row the first run added and adds none, as `ormwrites` decides for ``session.query(..).first()`` then
``session.add(..)`` and an anti-join against the target decides in SQL. Tuned on round 18 (Amsterdam's
charging points, labelled false); an insert into another table than the lookup's stays an append.

Round 36h (lint66; round 40's TemSalnikov/DWH_dags, whose ``write_meta_file`` was raised 86 times): the
lookup may also be a cursor's fetch of the SELECT it executed just before (``cur.execute("SELECT ..
FROM t WHERE key = %s"); rows = cur.fetchall(); if rows: .. else: cur.execute("INSERT INTO t ..")``,
``if cur.fetchone() is None``, ``count = cur.fetchone()[0]; if count == 0`` after ``SELECT count(*)``,
``if not exists`` after ``SELECT EXISTS (..)``), its key in a WHERE or a JOIN's ON. A lookup keyed on
columns the INSERT does not write (another key of the same table) guards nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from airflow_idempotent.lint.facts import Write
from airflow_idempotent.lint.localvalues import value_at
from airflow_idempotent.lint.rowuse import ROW_METHODS
from airflow_idempotent.lint.scope import Scope, bind_arguments
from airflow_idempotent.lint.source import UNRESOLVED
from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = ["Lookup", "absent_after_lookup", "inserted_when_absent", "key_filtered", "skipped_keys"]

#: a cursor's fetch of the rows the statement it executed last returned
_FETCHES = frozenset({"fetchone", "fetchall", "fetchmany", "first", "scalar", "one_or_none"})
#: a key column the lookup compares, on a table the statement does not say (an unqualified column of
#: a join)
_ANY_TABLE = "*"


@dataclass(frozen=True)
class Lookup:
    """A SELECT whose empty result a write waits for: the function or fetch that runs it, the tables
    it reads, and the (table, column) pairs it compares with a value (its key; empty when unknown)."""

    name: str
    tables: frozenset[str]
    keys: frozenset[tuple[str, str]] = frozenset()

    def guards(self, write: Write) -> bool:
        """The write adds to a table the lookup reads, on the key it looks up (when both are known)."""
        table = _last(write.table)
        if table not in self.tables:
            return False
        keys = {column for owner, column in self.keys if owner in (table, _ANY_TABLE)}
        columns = {c.lower() for c in write.columns}
        return not keys or not columns or bool(keys & columns)


def absent_after_lookup(
    call: ast.Call, fn: ast.AST, parent_of: dict[ast.AST, ast.AST], scope: Scope
) -> Lookup | None:
    """The lookup (its name, the tables and key its SELECT reads) when `call` (in `fn`, read in
    `scope`) runs only on a branch where that lookup found nothing; None otherwise."""
    current: ast.AST = call
    while (parent := parent_of.get(current)) is not None and parent is not fn:
        if isinstance(parent, ast.If) and (current in parent.body or current in parent.orelse):
            looked = _lookup_absent(parent.test, current in parent.body, fn, parent)
            texts = _sql_of(looked, fn, scope) if looked is not None else None
            tables, keys = _selected(texts) if texts else (frozenset(), frozenset())
            if looked is not None and tables:
                return Lookup(dotted(looked.func), tables, keys)
        current = parent
    return None


def inserted_when_absent(writes: list[Write], lookup: Lookup | None) -> list[Write]:
    """The appends among `writes` into a table the lookup reads, on its key: each becomes ``dedup``
    (it inserts only rows the table does not have yet); the ones changed are returned, to be said as
    information."""
    if lookup is None:
        return []
    return _deduplicated(writes, lookup, f"run only when {lookup.name}() finds no such row")


def _deduplicated(writes: list[Write], lookup: Lookup, why: str) -> list[Write]:
    changed = []
    for write in writes:
        if write.how == "append" and lookup.guards(write):
            write.how = "dedup"
            write.detail = f"{write.detail} ({why})"
            changed.append(write)
    return changed


def _lookup_absent(test: ast.expr, body: bool, fn: ast.AST, at: ast.If) -> ast.Call | None:
    """The function whose empty result the branch taken requires: ``not f(..)`` / ``f(..) is None``
    on the body, ``f(..)`` on the else; or the same of a local assigned ``x = f(..)`` before `at`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _lookup_absent(test.operand, not body, fn, at)
    empty = _empty_when(test)
    if empty is not None and isinstance(test, ast.Compare):  # ``count == 0``, ``len(rows) > 0``
        return _lookup_absent(_counted(test.left), not body if empty else body, fn, at)
    test = _counted(test)
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and isinstance(test.ops[0], ast.Is | ast.IsNot)
    ):
        return _lookup_absent(test.left, not body if isinstance(test.ops[0], ast.Is) else body, fn, at)
    if body:
        return None  # the branch taken when the lookup found something
    if isinstance(test, ast.Call) and _lookup_call(test):
        return test
    if isinstance(test, ast.Name):
        assigned = [
            s.value
            for s in ast.walk(fn)
            if isinstance(s, ast.Assign)
            and s.lineno < at.lineno
            and any(isinstance(t, ast.Name) and t.id == test.id for t in s.targets)
        ]
        value = _counted(assigned[0]) if len(assigned) == 1 else None
        if isinstance(value, ast.Call) and _lookup_call(value):
            return value
    return None


def _counted(node: ast.expr) -> ast.expr:
    """What a row count or first column reads: ``rows`` of ``len(rows)``, ``cur.fetchone()`` of
    ``cur.fetchone()[0]`` (a ``count(*)`` or ``EXISTS``)."""
    if isinstance(node, ast.Call) and dotted(node.func) == "len" and len(node.args) == 1:
        return _counted(node.args[0])
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 0:
        return _counted(node.value)
    return node


def _empty_when(test: ast.expr) -> bool | None:
    """For ``x == 0``, ``x < 1`` (True: the test holds when nothing was found) and ``x > 0``,
    ``x != 0``, ``x >= 1`` (False); None for any other test."""
    if not (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant)
    ):
        return None
    value, op = test.comparators[0].value, test.ops[0]
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if (isinstance(op, ast.Eq) and value == 0) or (isinstance(op, ast.Lt) and value == 1):
        return True
    if (isinstance(op, ast.NotEq | ast.Gt) and value == 0) or (isinstance(op, ast.GtE) and value == 1):
        return False
    return None


def _lookup_call(call: ast.Call) -> bool:
    """A repository function (``site_is_known(..)``) or a query run for its rows (``hook.get_first(
    "SELECT .. FROM t WHERE key = ..")``, round 34c: a progress row created when none is found), or a
    cursor's fetch of the statement it ran (``cur.fetchall()``, round 36h)."""
    return isinstance(call.func, ast.Name) or last_name(dotted(call.func)) in ROW_METHODS | _FETCHES


def _sql_of(call: ast.Call, fn: ast.AST, scope: Scope) -> list[str] | None:
    """The strings the repository function `call` calls holds, its arguments bound (f-strings
    rendered whole), or the SQL a query method is handed; None when it is neither."""
    if isinstance(call.func, ast.Attribute) and call.func.attr in _FETCHES:
        executed = _executed_before(call, fn)
        return None if executed is None else _sql_of(executed, fn, scope)
    if not isinstance(call.func, ast.Name):
        arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "sql"), None)
        return None if arg is None else [t.text for t in value_at(fn, arg, call, scope).strings(arg)]
    found = scope.function(call.func.id)
    if found is None:
        return None
    bound = found[1].child(bind_arguments(found[0], call, scope, found[1]))
    parts = {id(v) for n in ast.walk(found[0]) if isinstance(n, ast.JoinedStr) for v in n.values}
    strings = [n for n in ast.walk(found[0]) if isinstance(n, ast.Constant | ast.JoinedStr)]
    return [t.text for n in strings if id(n) not in parts and (t := bound.string(n)) is not None]


def _executed_before(fetch: ast.Call, fn: ast.AST) -> ast.Call | None:
    """The ``execute`` whose rows `fetch` reads: chained (``cur.execute(..).fetchone()``), or the
    last ``cur.execute(..)`` of the same cursor written before the fetch in `fn`."""
    assert isinstance(fetch.func, ast.Attribute)
    owner = fetch.func.value
    if isinstance(owner, ast.Call) and last_name(dotted(owner.func)) == "execute":
        return owner if owner.args else None
    cursor = dotted(owner)
    if not cursor:
        return None
    before = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "execute"
        and dotted(n.func.value) == cursor
        and n.args
        and (n.lineno, n.col_offset) < (fetch.lineno, fetch.col_offset)
    ]
    return max(before, key=lambda n: (n.lineno, n.col_offset), default=None)


def skipped_keys(fn: ast.AST, scope: Scope) -> frozenset[str]:
    """The tables whose keys `fn` selects into a name it then tests membership in: ``exist_ids =
    hook.get_pandas_df("select id from t where id in (..)")["id"].tolist()`` and ``if m["id"] in
    exist_ids: skip`` (round 34c, rajeswarivadivel-cf's Outlook messages): the rows it goes on to
    insert into those tables are the ones they lack, an anti-join written in Python."""
    tested = {
        n.id
        for c in ast.walk(fn)
        if isinstance(c, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in c.ops)
        for side in c.comparators
        for n in ast.walk(side)
        if isinstance(n, ast.Name)
    }
    tables: set[str] = set()
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Name) and target.id in tested):
            continue
        for call in (c for c in ast.walk(node.value) if isinstance(c, ast.Call)):
            if last_name(dotted(call.func)) in ROW_METHODS and (texts := _sql_of(call, fn, scope)):
                tables |= _selected(texts)[0]
    return frozenset(tables)


def key_filtered(writes: list[Write], tables: frozenset[str]) -> list[Write]:
    """The appends among `writes` into `tables` (`skipped_keys`): each becomes ``dedup``; the ones
    changed are returned, to be said as information."""
    return _deduplicated(writes, Lookup("", tables), "rows whose key a SELECT of it found are skipped first")


def _selected(texts: list[str]) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """The tables the SELECT statements among `texts` read (by last name part, lower case) and the
    (table, column) pairs they compare with a value; nothing when one is SQL of another kind (then
    the function is no plain lookup) or a SELECT filters on nothing (a WHERE, or a join's key)."""
    tables: set[str] = set()
    keys: set[tuple[str, str]] = set()
    for text in texts:
        if not text.lstrip().lower().startswith(("select", "with", "insert", "update", "delete", "merge")):
            continue
        try:
            parsed = sqlglot.parse_one(text, read="postgres")
        except sqlglot.errors.SqlglotError:
            return frozenset(), frozenset()
        if not isinstance(parsed, exp.Select):
            return frozenset(), frozenset()  # a write makes it no lookup
        compared = _compared_keys(parsed)
        if parsed.find(exp.Where) is None and not compared:
            return frozenset(), frozenset()  # a lookup by key filters the rows
        tables.update(_last(".".join(p for p in (t.db, t.name) if p)) for t in parsed.find_all(exp.Table))
        keys |= compared
    return frozenset(tables), frozenset(keys)


def _compared_keys(select: exp.Select) -> set[tuple[str, str]]:
    """The (table, column) pairs a WHERE or a join's ON compares with a value (``key = %s``, ``f.name
    = 'x'``), not with another column; a column of no named table in a join is any table's."""
    names = {t.alias_or_name.lower(): _last(t.name) for t in select.find_all(exp.Table)}
    only = next(iter(set(names.values()))) if len(set(names.values())) == 1 else _ANY_TABLE
    conditions = [w.this for w in select.find_all(exp.Where)]
    conditions += [j.args["on"] for j in select.find_all(exp.Join) if j.args.get("on") is not None]
    out: set[tuple[str, str]] = set()
    for condition in conditions:
        for eq in condition.find_all(exp.EQ):
            for column, other in ((eq.this, eq.expression), (eq.expression, eq.this)):
                if (
                    isinstance(column, exp.Column)
                    and not _column(other)
                    and not column.name.startswith(UNRESOLVED)
                ):
                    owner = names.get(column.table.lower(), _ANY_TABLE) if column.table else only
                    out.add((owner, column.name.lower()))
    return out


def _column(node: exp.Expression) -> bool:
    """A column of a table (not a Python value the linter cannot know, rendered as a name)."""
    return any(not c.name.startswith(UNRESOLVED) for c in node.find_all(exp.Column))


def _last(table: str) -> str:
    return table.rsplit(".", 1)[-1].strip('"`').lower()

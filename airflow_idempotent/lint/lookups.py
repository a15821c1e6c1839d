"""Inserts a helper runs only when a lookup of the same table found no row ("get or create" in SQL).

``if not site_is_known(site_id, conn): insert_site(conn, site_id, ..)``, or ``found = get_row(curs,
table, key)`` then ``if found: update(..) else: create(..)``: the lookup is a repository function that
SELECTs from a table, and the insert the guarded helper runs goes into that table. A rerun finds the
row the first run added and adds none, as `ormwrites` decides for ``session.query(..).first()`` then
``session.add(..)`` and an anti-join against the target decides in SQL. Tuned on round 18 (Amsterdam's
charging points, labelled false); an insert into another table than the lookup's stays an append.
"""

from __future__ import annotations

import ast

import sqlglot
from sqlglot import exp

from airflow_idempotent.lint.facts import Write
from airflow_idempotent.lint.localvalues import value_at
from airflow_idempotent.lint.rowuse import ROW_METHODS
from airflow_idempotent.lint.scope import Scope, bind_arguments
from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = ["absent_after_lookup", "inserted_when_absent", "key_filtered", "skipped_keys"]


def absent_after_lookup(
    call: ast.Call, fn: ast.AST, parent_of: dict[ast.AST, ast.AST], scope: Scope
) -> tuple[str, frozenset[str]] | None:
    """The lookup function's name and the tables its SELECT reads when `call` (in `fn`, read in
    `scope`) runs only on a branch where that lookup found nothing; None otherwise."""
    current: ast.AST = call
    while (parent := parent_of.get(current)) is not None and parent is not fn:
        if isinstance(parent, ast.If) and (current in parent.body or current in parent.orelse):
            looked = _lookup_absent(parent.test, current in parent.body, fn, parent)
            texts = _sql_of(looked, fn, scope) if looked is not None else None
            tables = _selected_tables(texts) if texts else frozenset()
            if looked is not None and tables:
                return dotted(looked.func), tables
        current = parent
    return None


def inserted_when_absent(writes: list[Write], lookup: tuple[str, frozenset[str]] | None) -> list[Write]:
    """The appends among `writes` into a table the lookup reads: each becomes ``dedup`` (it inserts
    only rows the table does not have yet); the ones changed are returned, to be said as information."""
    if lookup is None:
        return []
    name, tables = lookup
    return _deduplicated(writes, tables, f"run only when {name}() finds no such row")


def _deduplicated(writes: list[Write], tables: frozenset[str], why: str) -> list[Write]:
    changed = []
    for write in writes:
        if write.how == "append" and _last(write.table) in tables:
            write.how = "dedup"
            write.detail = f"{write.detail} ({why})"
            changed.append(write)
    return changed


def _lookup_absent(test: ast.expr, body: bool, fn: ast.AST, at: ast.If) -> ast.Call | None:
    """The function whose empty result the branch taken requires: ``not f(..)`` / ``f(..) is None``
    on the body, ``f(..)`` on the else; or the same of a local assigned ``x = f(..)`` before `at`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _lookup_absent(test.operand, not body, fn, at)
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
        if len(assigned) == 1 and isinstance(assigned[0], ast.Call) and _lookup_call(assigned[0]):
            return assigned[0]
    return None


def _lookup_call(call: ast.Call) -> bool:
    """A repository function (``site_is_known(..)``) or a query run for its rows (``hook.get_first(
    "SELECT .. FROM t WHERE key = ..")``, round 34c: a progress row created when none is found)."""
    return isinstance(call.func, ast.Name) or last_name(dotted(call.func)) in ROW_METHODS


def _sql_of(call: ast.Call, fn: ast.AST, scope: Scope) -> list[str] | None:
    """The strings the repository function `call` calls holds, its arguments bound (f-strings
    rendered whole), or the SQL a query method is handed; None when it is neither."""
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
                tables |= _selected_tables(texts)
    return frozenset(tables)


def key_filtered(writes: list[Write], tables: frozenset[str]) -> list[Write]:
    """The appends among `writes` into `tables` (`skipped_keys`): each becomes ``dedup``; the ones
    changed are returned, to be said as information."""
    return _deduplicated(writes, tables, "rows whose key a SELECT of it found are skipped first")


def _selected_tables(texts: list[str]) -> frozenset[str]:
    """The tables the SELECT statements among `texts` read (by last name part, lower case), or
    nothing when one is SQL of another kind (then the function is no plain lookup)."""
    tables: set[str] = set()
    for text in texts:
        if not text.lstrip().lower().startswith(("select", "with", "insert", "update", "delete", "merge")):
            continue
        try:
            parsed = sqlglot.parse_one(text, read="postgres")
        except sqlglot.errors.SqlglotError:
            return frozenset()
        if not isinstance(parsed, exp.Select) or parsed.args.get("where") is None:
            return frozenset()  # a lookup by key has a WHERE; a write makes it no lookup
        tables.update(_last(".".join(p for p in (t.db, t.name) if p)) for t in parsed.find_all(exp.Table))
    return frozenset(tables)


def _last(table: str) -> str:
    return table.rsplit(".", 1)[-1].strip('"`').lower()

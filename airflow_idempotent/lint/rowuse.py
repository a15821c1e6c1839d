"""Where the rows of a query a task's Python code runs go: to a write, or only to a print or a log
line (round 34c of issue 35).

Principle: a clock in a SELECT's filter is a window only when the rows it chooses reach what the task
writes. ``today = hook.get_first("SELECT COUNT(*) FROM news WHERE fetched_at >= CURRENT_DATE")``
followed only by ``print(f"added today: {today[0]}")`` chooses no rows written: a rerun prints another
count and writes the same data (yih5025's collection statistics, round 34: 9 false IDEM001/IDEM004).
The rows are followed through names, subscripts, formats, conditional expressions and loops; a branch
or loop on them counts only when what it runs makes no call but prints, logs, conversions and more
reads. Anything else (an argument of another call, an attribute kept, a return value, an XCom) reaches
data.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = ["ROW_METHODS", "rows_shown_only"]

#: methods whose return value is the rows (or first row) a query selected
ROW_METHODS = frozenset({"get_first", "get_records", "get_pandas_df", "read_sql", "read_sql_query"})
#: a cursor's fetches chained on an ``execute``: ``cur.execute(sql).fetchone()``
_FETCHES = frozenset({"fetchone", "fetchall", "fetchmany", "first", "all", "scalar", "one"})
#: calls that only show a value: a log line, a message, an exception's text
_SHOW = frozenset(
    {
        "print", "info", "debug", "warning", "warn", "error", "exception", "critical", "log",
        "AirflowSkipException", "AirflowFailException", "AirflowException", "ValueError",
        "RuntimeError", "Exception",
    }
)  # fmt: skip
#: calls that compute a value from the rows and hand it on (a count, a format, a conversion)
_CARRY = frozenset(
    {
        "len", "int", "float", "str", "round", "sum", "max", "min", "abs", "bool", "list", "dict",
        "tuple", "set", "sorted", "enumerate", "zip", "range", "format", "join", "strftime",
        "isoformat", "tolist", "to_dict", "items", "keys", "values", "get", "isinstance",
    }
)  # fmt: skip
_DEPTH = 4


def rows_shown_only(call: ast.Call, fn: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> str | None:
    """Why the rows `call` (a query run in `fn`) returns reach no write, or None when they may (or the
    call is no query whose result is its rows). A return value is data: a
    ``@task`` returning rows hands them to the task that writes them (yih5025's price caches)."""
    method = last_name(dotted(call.func))
    node: ast.AST = call
    if method not in ROW_METHODS:
        parent = parent_of.get(call)
        outer = parent_of.get(parent) if isinstance(parent, ast.Attribute) else None
        if not (
            isinstance(parent, ast.Attribute) and parent.attr in _FETCHES and isinstance(outer, ast.Call)
        ):
            return None
        node = outer
    return _follow(node, fn, parent_of, 0, set())


def _follow(
    node: ast.AST,
    fn: ast.AST,
    parent_of: dict[ast.AST, ast.AST],
    depth: int,
    seen: set[str],
) -> str | None:
    if depth > _DEPTH:
        return None
    current, parent = node, parent_of.get(node)
    while parent is not None:
        if isinstance(parent, ast.Call):
            func = last_name(dotted(parent.func))
            if current is parent.func:
                if func not in _CARRY | _FETCHES:
                    return None  # a method of the rows the linter does not know
            elif func in _SHOW:
                return "are only printed or logged"
            elif func not in _CARRY:
                return None  # handed to a call: a write, a request, a helper
        elif isinstance(parent, ast.If | ast.While) and current is parent.test:
            return "only decide what is printed or logged" if _quiet(parent) else None
        elif isinstance(parent, ast.For) and current is parent.iter:
            if not _quiet(parent):
                return None
            names = [n.id for n in ast.walk(parent.target) if isinstance(n, ast.Name)]
            return _names_shown(names, parent, fn, parent_of, depth, seen)
        elif isinstance(parent, ast.Assign):
            target = parent.targets[0] if len(parent.targets) == 1 else None
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                target = target.value  # ``stats[key] = rows[0]``: where the container goes
            elif not isinstance(target, ast.Name):
                return None  # kept in an attribute or unpacked: followed no further
            return _names_shown([target.id], fn, fn, parent_of, depth, seen, parent)
        elif isinstance(parent, ast.Expr):
            return "are not kept"
        elif isinstance(parent, ast.stmt | ast.comprehension | ast.Lambda):
            return None
        # an expression (a subscript, a format, a comparison, ``rows[0] if rows else 0``): the value
        # moves on with it
        current, parent = parent, parent_of.get(parent)
    return None


def _names_shown(
    names: list[str],
    body: ast.AST,
    fn: ast.AST,
    parent_of: dict[ast.AST, ast.AST],
    depth: int,
    seen: set[str],
    assigned: ast.Assign | None = None,
) -> str | None:
    """Every read of `names` in `body` is shown only (a reason), else None; after `assigned`, only the
    reads up to the name's next assignment (``result`` reused for another query's rows)."""
    reasons: list[str] = []
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        first, until = 0, float("inf")
        if assigned is not None:
            first = assigned.end_lineno or assigned.lineno
            later = [
                n.lineno
                for n in ast.walk(body)
                if isinstance(n, ast.Name)
                and n.id == name
                and isinstance(n.ctx, ast.Store)
                and n.lineno > first
            ]
            until = min(later, default=until)
        for use in ast.walk(body):
            if (
                isinstance(use, ast.Name)
                and use.id == name
                and isinstance(use.ctx, ast.Load)
                and (assigned is None or first < use.lineno < until)
            ):
                verdict = _follow(use, fn, parent_of, depth + 1, seen)
                if verdict is None:
                    return None
                reasons.append(verdict)
    return reasons[0] if reasons else "are never read"


def _quiet(block: ast.If | ast.While | ast.For) -> bool:
    """What `block` runs makes no call but prints, logs, conversions and reads of rows: it writes
    nothing, whichever way the rows decide it."""
    for stmt in [*block.body, *block.orelse]:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                func = last_name(dotted(node.func))
                if func not in _SHOW and func not in _CARRY and func not in ROW_METHODS | _FETCHES:
                    return False
    return True

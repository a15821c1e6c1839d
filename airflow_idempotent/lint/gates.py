"""Clock and state values that reach no data: readiness gates, done-flags, clocks only printed.

Principle (IDEM004): a span-shifted clock (``now - timedelta(hours=3)``) is "the last N" only when
a span of data is read over it. When every shifted value only decides whether the run goes ahead
(the test of an ``if`` outside any loop, directly, through names or negation, or returned by a
predicate whose every call is such a test), it is a readiness gate ("skip until the saved start is
3 hours old"): no span is read from it, and a late rerun passes the gate as the first run did. The
same value compared row by row (in a loop or a comprehension), used as a filter (``df[df.ts >
cutoff]``), a query's bound or anything else stays a window.

Principle (IDEM004, state): a Variable whose read value is only compared with a constant
(``Variable.get(FLAG) == 'true'``) or given to ``bool()`` is a flag that says whether something
happened (a full load done); no window starts at it, so it is no watermark. Round 21: so is a read
whose default says what the value is: a boolean (``Variable.get("IS_SPORADIC", "False")``) is a flag,
and a list, tuple or set (``Variable.get("orphan_documents", default_var=[], deserialize_json=True)``)
is a collection: a queue of ids to retry, the ids checked so far, a list to report (scieloorg's
opac-airflow, 8 false IDEM004 of round 21). A watermark is one point a window starts at; a
collection holds items, each taken or skipped by itself, so no span of data is missed behind it.

Principle (IDEM003): a helper that only returns the clock (``def _now_utc(): return
datetime.now(UTC)``) does with it what its callers do with the call: when every call the task makes
of it is only printed or logged (`pyfacts.clock_use` of the call in the caller: ``"output"``) or
never read, the clock reaches no data: information. One call that keeps, writes, filters by it or
hands it to another function keeps the finding.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.pyfacts import RELATIVE_CALLS, clock_use, parents
from airflow_idempotent.lint.syntax import dotted, in_loop, last_name
from airflow_idempotent.lint.textuse import assigned_name, name_loads

__all__ = ["GATE_TEXT", "PRINTED_TEXT", "flag_only", "gates_only", "returned_for_output", "shift_gates"]

GATE_TEXT = (
    "is shifted by a span only to decide whether the run goes ahead (a readiness gate): no span is "
    "read from it, and a late rerun passes the gate as the first run did"
)
PRINTED_TEXT = (
    "is returned only to calls whose value is printed or logged: nothing is written, filtered or kept from it"
)

#: a helper's calls in the task, each with the function it is called in
Calls = list[tuple[ast.Call, ast.AST]] | None

GATE = "gate"
PREDICATE = "predicate"
_FLAG_OPS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)
_TEXT_METHODS = frozenset({"lower", "upper", "strip", "casefold"})
_MAX_DEPTH = 3


def _is_shift(binop: ast.AST | None, node: ast.AST) -> bool:
    if not (isinstance(binop, ast.BinOp) and isinstance(binop.op, ast.Add | ast.Sub)):
        return False
    other = binop.right if binop.left is node else binop.left
    if isinstance(other, ast.Call):
        return last_name(dotted(other.func)) in RELATIVE_CALLS
    return isinstance(other, ast.Name | ast.Attribute) or (
        isinstance(other, ast.Constant) and not isinstance(other.value, str)
    )


def _shifts(node: ast.AST, body: ast.AST, parent_of: dict[ast.AST, ast.AST], depth: int = 0) -> list[ast.AST]:
    """The span shifts (``clock - span``) the clock value reaches, directly or through names."""
    parent = parent_of.get(node)
    if _is_shift(parent, node):
        return [parent]  # type: ignore[list-item]
    name = assigned_name(parent)
    if name is None or depth >= _MAX_DEPTH:
        return []
    return [s for use in name_loads(body, name) for s in _shifts(use, body, parent_of, depth + 1)]


def _decides(
    node: ast.AST, body: ast.AST, parent_of: dict[ast.AST, ast.AST], compared: bool, depth: int = 0
) -> str | None:
    """GATE when the value only ends as the test of an ``if`` outside loops (once compared), PREDICATE
    when the comparison is returned outside loops, else None."""
    child, parent = node, parent_of.get(node)
    while parent is not None:
        if isinstance(parent, ast.Compare) and not compared:
            compared = True
        elif isinstance(parent, ast.BoolOp | ast.UnaryOp) and compared:
            pass
        elif isinstance(parent, ast.If) and child is parent.test:
            return GATE if compared and not in_loop(parent, parent_of) else None
        elif isinstance(parent, ast.Return):
            return PREDICATE if compared and not in_loop(parent, parent_of) else None
        elif (name := assigned_name(parent)) is not None and depth < _MAX_DEPTH:
            uses = name_loads(body, name)
            found = {_decides(use, body, parent_of, compared, depth + 1) for use in uses}
            return found.pop() if uses and len(found) == 1 else None
        else:
            return None
        child, parent = parent, parent_of.get(parent)
    return None


def shift_gates(clock: ast.AST, body: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> str | None:
    """GATE when the clock read is shifted by a span and every shifted value only gates the run in
    `body`; PREDICATE when they are all returned as the answer of a predicate (its callers decide,
    see `call_gates`); else None."""
    shifts = _shifts(clock, body, parent_of)
    found = {_decides(shift, body, parent_of, False) for shift in shifts}
    return found.pop() if shifts and len(found) == 1 else None


def gates_only(clock: ast.Call, fn: ast.AST, parent_of: dict[ast.AST, ast.AST], calls: Calls) -> bool:
    """`shift_gates` is GATE, or PREDICATE and each of the predicate's `calls` (a boolean) only gates
    the run in the function it is called in."""
    verdict = shift_gates(clock, fn, parent_of)
    if verdict == GATE:
        return True
    return (
        verdict == PREDICATE
        and bool(calls)
        and all(_decides(call, caller, parents(caller), True) == GATE for call, caller in calls or ())
    )


def returned_for_output(clock: ast.Call, parent_of: dict[ast.AST, ast.AST], calls: Calls) -> bool:
    """The clock read is what its helper returns, and every one of the helper's `calls` is only
    printed, logged or never read (the IDEM003 principle above)."""
    if not calls or not isinstance(parent_of.get(clock), ast.Return):
        return False
    return all(clock_use(call, caller, parents(caller)) in ("output", "unused") for call, caller in calls)


def flag_only(get: ast.Call, parent_of: dict[ast.AST, ast.AST]) -> bool:
    """The state read's value is a flag or a collection, not a point: only compared with constants or
    made a bool, or its default is a boolean, a list, a tuple or a set (`_not_a_point`)."""
    if _not_a_point(get):
        return True
    child, parent = get, parent_of.get(get)
    while isinstance(parent, ast.Attribute) and parent.attr in _TEXT_METHODS:
        call = parent_of.get(parent)
        if not isinstance(call, ast.Call) or call.func is not parent:
            return False
        child, parent = call, parent_of.get(call)
    if isinstance(parent, ast.Call) and dotted(parent.func) == "bool":
        return True
    return (
        isinstance(parent, ast.Compare)
        and parent.left is child
        and all(isinstance(op, _FLAG_OPS) for op in parent.ops)
        and all(_constant(c) for c in parent.comparators)
    )


#: spellings of a boolean a Variable keeps as text
_BOOL_TEXT = frozenset({"true", "false"})


def _not_a_point(get: ast.Call) -> bool:
    """The read's default (second argument, ``default_var=`` or ``default=``) is a boolean (``False``,
    ``"False"``) or a list, tuple or set display: the value is a flag or a collection."""
    default = get.args[1] if len(get.args) > 1 else None
    for keyword in get.keywords:
        if keyword.arg in ("default_var", "default"):
            default = keyword.value
    if isinstance(default, ast.List | ast.Tuple | ast.Set):
        return True
    if (
        isinstance(default, ast.Call)
        and dotted(default.func) in ("list", "set", "tuple")
        and not default.args
    ):
        return True
    if not isinstance(default, ast.Constant):
        return False
    value = default.value
    return isinstance(value, bool) or (isinstance(value, str) and value.lower() in _BOOL_TEXT)


def _constant(node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_constant(e) for e in node.elts)
    return isinstance(node, ast.Constant)

"""Small readings of Python's syntax tree every part of the linter shares: dotted names, keywords."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "BODY_KEYWORDS",
    "assigned_values",
    "dict_literal",
    "dotted",
    "in_loop",
    "keywords",
    "last_name",
    "post_order_calls",
    "request_body",
    "request_url",
    "walk_no_defs",
]

#: the keywords an HTTP client's call (requests, httpx) carries its body in
BODY_KEYWORDS = ("json", "data")


def dotted(node: ast.AST) -> str:
    """`a.b.c` for Name/Attribute chains; calls and subscripts are looked through."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return dotted(node.func)
    if isinstance(node, ast.Subscript):
        return dotted(node.value)
    return ""


def self_attr(node: ast.AST | None) -> str | None:
    """The attribute name of ``self.<name>``, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def last_name(name: str) -> str:
    """The last part of a dotted name: `task` of `airflow.sdk.task`."""
    return name.rsplit(".", 1)[-1]


def assigned_values(fn: ast.AST, name: str) -> list[ast.expr]:
    """The values `fn` assigns to the local name `name` (plain `name = value` statements)."""
    return [
        n.value
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
    ]


def dict_literal(node: ast.expr, fn: ast.AST) -> ast.Dict | None:
    """The dict literal `node` is: written in place, or the one value `fn` assigns the local name."""
    if isinstance(node, ast.Dict):
        return node
    if isinstance(node, ast.Name):
        values = assigned_values(fn, node.id)
        if len(values) == 1 and isinstance(values[0], ast.Dict):
            return values[0]
    return None


def request_url(call: ast.Call) -> ast.expr | None:
    """The URL an HTTP client's call sends to: its first argument, or ``url=``."""
    return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "url"), None)


def request_body(call: ast.Call) -> ast.expr | None:
    """The body an HTTP client's call sends: its first ``json=`` or ``data=`` keyword."""
    return next((k.value for k in call.keywords if k.arg in BODY_KEYWORDS), None)


def keywords(call: ast.Call) -> dict[str, ast.expr]:
    """A call's keyword arguments by name (``**kwargs`` left out)."""
    return {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}


def asserts_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Principle (IDEM003/IDEM004): a value read only in the test of an ``assert``, or of an ``if``
    whose body only raises an error (no ``else``; a skip is a readiness gate), only decides whether
    the task fails: a freshness or health check (``if now() - last > timedelta(hours=1): raise ..``).
    Nothing is read over a window or written from it, so a rerun a day late reads and writes the
    same data (it may fail instead)."""
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, ast.stmt):
        child, parent = parent, parents.get(parent)
    if isinstance(parent, ast.Assert):
        return child is parent.test
    return (
        isinstance(parent, ast.If)
        and child is parent.test
        and not parent.orelse
        and all(isinstance(stmt, ast.Raise) and not _skips(stmt) for stmt in parent.body)
    )


def _skips(stmt: ast.Raise) -> bool:
    """``raise AirflowSkipException(..)``: a readiness gate (reported as information by `gates`)."""
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return exc is not None and "Skip" in last_name(dotted(exc))


def main_guard(stmt: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` at module level: its body runs only when the file is executed as
    a script, never when Airflow parses or runs the DAG file, so it is no DAG code."""
    test = stmt.test if isinstance(stmt, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def module_function(call: ast.Call, modules: tuple[str, ...]) -> bool:
    """A call of a module's function (``pandas_gbq.to_gbq(df, ..)``, or a bare imported name), not a
    method of an object (``df.to_gbq(..)``): its first argument is the object."""
    func = call.func
    return isinstance(func, ast.Name) or (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in modules
    )


def post_order_calls(node: ast.AST) -> Iterator[ast.Call]:
    """The calls under `node` (not inside function, lambda or class bodies), each after its arguments,
    in the order Python evaluates them."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            yield from post_order_calls(child)
    if isinstance(node, ast.Call):
        yield node


def walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk in source order, not entering function, lambda or class bodies."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children = [
            child
            for child in ast.iter_child_nodes(current)
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef)
        ]
        stack.extend(reversed(children))


def decided(test: ast.expr, leaf: Callable[[ast.expr], bool | None]) -> bool | None:
    """Whether an ``if`` test holds, in three values: ``not``, ``and`` and ``or`` combined from what
    `leaf` says of each other part (True, False, or None when unknown); None when an unknown part
    decides, so the caller walks both branches."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = decided(test.operand, leaf)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [decided(v, leaf) for v in test.values]
        is_or = isinstance(test.op, ast.Or)  # True decides an `or`, False an `and`
        if is_or in parts:
            return is_or
        return None if None in parts else not is_or
    return leaf(test)


def compared(value: Any, op: ast.cmpop, other: Any) -> bool | None:
    """``value <op> other`` for the comparisons an ``if`` of constants makes: ``==``/``is`` and
    ``!=``/``is not`` with one value, ``in``/``not in`` with a list of values; None otherwise."""
    if isinstance(op, ast.In | ast.NotIn):
        return None if not isinstance(other, list) else (value in other) == isinstance(op, ast.In)
    if isinstance(op, ast.Eq | ast.Is):
        return bool(value == other)
    if isinstance(op, ast.NotEq | ast.IsNot):
        return bool(value != other)
    return None


#: statements and expressions that run their body once per item
_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)


def in_loop(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """`node` runs once per item of a loop or comprehension of its own function."""
    parent = parents.get(node)
    while parent is not None and not isinstance(parent, _SCOPES):
        if isinstance(parent, _LOOPS):
            return True
        parent = parents.get(parent)
    return False

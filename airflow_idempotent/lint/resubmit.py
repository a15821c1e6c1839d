"""Requests whose repeat rewrites what the first wrote: the body replaces an interval.

Principle (IDEM006): an HTTP request retried after a failure sends its body again. When the body,
as the repository builds it (the ``data=``/``json=`` value, through the local names it is assigned
from and the repository's own functions that build it, three calls deep), is an ingestion that
replaces its interval (a statement ``REPLACE INTO .. OVERWRITE ..``, or a spec with
``"appendToExisting": False``, Druid's two ways of saying it), the second submission rewrites the
same interval with the same rows: information, not a defect. Any other body (a message, an order,
a row to insert) stays a finding; a builder that is not the repository's (an installed library) is
never read.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.scope import Scope

__all__ = ["REPLACES_TEXT", "replaces_interval"]

REPLACES_TEXT = "an ingestion that replaces its interval (REPLACE .. OVERWRITE, appendToExisting false)"
_BODY_KEYWORDS = ("data", "json")
_MAX_DEPTH = 3


def _text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return " ".join(_text(v) for v in node.values)
    return ""


def _marks(root: ast.AST) -> bool:
    for node in ast.walk(root):
        text = _text(node).upper()
        if "REPLACE INTO" in text and "OVERWRITE" in text:
            return True
        if isinstance(node, ast.Dict) and any(
            key is not None
            and _text(key) == "appendToExisting"
            and isinstance(value, ast.Constant)
            and value.value is False
            for key, value in zip(node.keys, node.values, strict=False)
        ):
            return True
    return False


def _builds(root: ast.AST, scope: Scope, depth: int) -> bool:
    """`root` (an expression or a function) holds a replace marker, or calls a repository function
    that builds one."""
    if _marks(root):
        return True
    if depth >= _MAX_DEPTH:
        return False
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            found = scope.function(node.func.id)
            if found is not None and found[0] is not root and _builds(found[0], found[1], depth + 1):
                return True
    return False


def replaces_interval(request: ast.Call, fn: ast.AST, scope: Scope) -> bool:
    """The request's body is built as an interval-replacing ingestion (see the module's principle)."""
    body = next((k.value for k in request.keywords if k.arg in _BODY_KEYWORDS), None)
    if body is None:
        return False
    if isinstance(body, ast.Name):
        sources = [
            n.value
            for n in ast.walk(fn)
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == body.id for t in n.targets)
        ]
        return bool(sources) and all(_builds(s, scope, 0) for s in sources)
    return _builds(body, scope, 0)

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
from airflow_idempotent.lint.syntax import assigned_values, request_body, request_url

__all__ = ["REPLACES_TEXT", "replaces_interval", "triggers_keyed_run"]

REPLACES_TEXT = (
    "the body is an ingestion that replaces its interval (REPLACE .. OVERWRITE, appendToExisting "
    "false): a second send rewrites the same interval"
)
_MAX_DEPTH = 3


def _text(node: ast.AST, scope: Scope) -> str:
    """A string literal's or f-string's text as the scope reads it (`Scope.string`), else ''."""
    if isinstance(node, ast.Constant | ast.JoinedStr):
        located = scope.string(node)
        return located.text if located is not None else ""
    return ""


def _marks(root: ast.AST, scope: Scope) -> bool:
    for node in ast.walk(root):
        text = _text(node, scope).upper()
        if "REPLACE INTO" in text and "OVERWRITE" in text:
            return True
        if isinstance(node, ast.Dict) and any(
            key is not None
            and _text(key, scope) == "appendToExisting"
            and isinstance(value, ast.Constant)
            and value.value is False
            for key, value in zip(node.keys, node.values, strict=False)
        ):
            return True
    return False


def _builds(root: ast.AST, scope: Scope, depth: int) -> bool:
    """`root` (an expression or a function) holds a replace marker, or calls a repository function
    that builds one."""
    if _marks(root, scope):
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
    body = request_body(request)
    if body is None:
        return False
    if isinstance(body, ast.Name):
        sources = assigned_values(fn, body.id)
        return bool(sources) and all(_builds(s, scope, 0) for s in sources)
    return _builds(body, scope, 0)


#: the body keys by which Airflow's REST API refuses a second DAG run (409 Conflict)
_RUN_KEYS = frozenset({"logical_date", "execution_date", "dag_run_id"})
_DAG_RUNS = "/dagRuns"


def _names_run(root: ast.AST, fn: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """A dict in `root` (or in what `fn` assigns to the names `root` reads) has a run key."""
    for node in ast.walk(root):
        if isinstance(node, ast.Dict) and any(
            k is not None and _text(k, scope) in _RUN_KEYS for k in node.keys
        ):
            return True
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and depth < _MAX_DEPTH
            and any(_names_run(value, fn, scope, depth + 1) for value in assigned_values(fn, node.id))
        ):
            return True
    return False


def triggers_keyed_run(request: ast.Call, fn: ast.AST, scope: Scope) -> bool:
    """Round 8 (IDEM006): a POST to Airflow's REST API that creates a DAG run (``/dags/{id}/dagRuns``)
    with the run's logical date or run id in its body is keyed by them: Airflow refuses a second run
    of one DAG with the same logical date or run id, so a retried trigger creates nothing. The URL is
    the request's own (first argument or ``url=``) as the scope reads it, or, when it is only known
    at run time (``self.api_endpoint``), a string of the same module naming ``/dagRuns``."""
    body = request_body(request)
    if body is None or not _names_run(body, fn, scope):
        return False
    url = request_url(request)
    located = scope.string(url) if isinstance(url, ast.expr) else None
    if located is not None and _DAG_RUNS in located.text:
        return True
    module = scope.root.tree
    return any(
        _DAG_RUNS in _text(n, scope.root)
        for n in ast.walk(module)
        if isinstance(n, ast.Constant | ast.JoinedStr)
    )

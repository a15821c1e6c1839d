"""Requests that set named fields of one object: sent again, the fields take the same values.

Principle (IDEM006, round 27c): a PATCH or PUT whose URL ends in one object's id (``f"user/{id}"``,
``BASE + f"items/{item_id}"``) and whose body is a JSON object of field values (``json={"groups":
groups}``, or a local name assigned such a dict) sets those fields: a merge patch (RFC 7396) applied
twice leaves what it left once, and PUT is idempotent by HTTP's definition. A retry sends it again and
nothing more changes: information (profcomff's removal of a member from a group: ``PATCH
auth/user/{id}`` with the group list without it). Still a finding:

- a POST (HTTP does not make it idempotent: a POST to ``user/{id}`` may create something under it);
- a URL that names no single object (a collection, an import endpoint, a URL held in a name);
- a body that is not a dict of fields (a JSON Patch list of operations, a list of records, a parameter);
- a value handed in as a parameter (its caller may have built it from what the receiver held);
- a dict with an operation key (``op``, ``increment``, ``$inc``, ``add``..) or a value the function
  builds from what it had (``+``/``-``, ``+=``, ``.append``/``.extend``/``.insert`` on a name the body
  carries: a read-modify-write, e.g. a group list read from the receiver with one more id appended,
  adds it again on a rerun, a balance read and increased increases twice).
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.syntax import dict_literal, request_body, request_url

__all__ = ["sets_fields"]

_OPERATION_KEY = re.compile(
    r"^\$|^(?:op|ops|operation|action|increment|inc|decrement|dec|add|append|push|remove|delta)$", re.I
)
_GROWERS = frozenset({"append", "extend", "insert", "add", "update"})


def sets_fields(call: ast.Call, method: str, fn: ast.AST) -> str | None:
    """Why sending `call` again sets the same fields (module doc), or None."""
    if method not in ("patch", "put"):
        return None
    id_name = _object_id(request_url(call))
    body = request_body(call)
    if id_name is None or body is None:
        return None
    fields = _field_dict(body, fn)
    if fields is None or not _plain(fields, fn) or _names(fields) & _enclosing_parameters(call, fn):
        return None
    keys = ", ".join(repr(k.value) for k in fields.keys if isinstance(k, ast.Constant))
    return (
        f"it sets named fields ({keys}) of one object (an HTTP {method.upper()} to a URL ending in "
        f"{{{id_name}}}): sent again, the fields take the same values"
    )


def _object_id(url: ast.expr | None) -> str | None:
    """The name of the id a URL ends in: an f-string (or a string added to one) whose last piece,
    a trailing ``/`` aside, is a formatted name."""
    if isinstance(url, ast.BinOp) and isinstance(url.op, ast.Add):
        url = url.right
    if not isinstance(url, ast.JoinedStr) or not url.values:
        return None
    pieces = list(url.values)
    last = pieces[-1]
    if isinstance(last, ast.Constant) and last.value == "/" and len(pieces) > 1:
        last = pieces[-2]
    if not isinstance(last, ast.FormattedValue) or last.format_spec is not None:
        return None
    before = pieces[pieces.index(last) - 1] if pieces.index(last) > 0 else None
    if not (isinstance(before, ast.Constant) and str(before.value).endswith("/")):
        return None  # ``f"{base}{id}"``: no path segment of its own
    value = last.value
    return (
        value.id
        if isinstance(value, ast.Name)
        else (value.attr if isinstance(value, ast.Attribute) else None)
    )


def _field_dict(body: ast.expr, fn: ast.AST) -> ast.Dict | None:
    """The dict literal the body is (`dict_literal`), unless it is a local name grown in place."""
    fields = dict_literal(body, fn)
    if fields is None or (isinstance(body, ast.Name) and _grown({body.id}, fn)):
        return None
    return fields


def _plain(fields: ast.Dict, fn: ast.AST) -> bool:
    """Every key a field name (a string, no operation), no value computed by ``+``/``-``, and no
    name a value carries a parameter or grown in place by the function."""
    if not fields.keys or any(
        not (isinstance(k, ast.Constant) and isinstance(k.value, str)) or _OPERATION_KEY.search(k.value)
        for k in fields.keys
    ):
        return False
    for value in fields.values:
        if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add | ast.Sub) for n in ast.walk(value)):
            return False
    return not _grown(_names(fields), fn)


def _names(fields: ast.Dict) -> set[str]:
    return {n.id for v in fields.values for n in ast.walk(v) if isinstance(n, ast.Name)}


def _enclosing_parameters(call: ast.Call, fn: ast.AST) -> set[str]:
    """The parameters of `fn` and of every function in it around `call` (a nested helper's too)."""
    found = _parameters(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and any(
            n is call for n in ast.walk(node)
        ):
            found |= _parameters(node)
    return found


def _parameters(fn: ast.AST) -> set[str]:
    """The function's parameters: a value handed in was built by a caller this check does not read
    (mozilla's ``update_whiteboard(bug_id, whiteboard + TAG)``), so it is not known to be plain."""
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        return set()
    args = fn.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _grown(names: set[str], fn: ast.AST) -> bool:
    """One of `names` is changed in place in `fn` (``x += ..``, ``x.append(..)``), or assigned a sum."""
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in names:
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _GROWERS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in names
        ):
            return True
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)
            and isinstance(node.value, ast.BinOp)
            and isinstance(node.value.op, ast.Add | ast.Sub)
        ):
            return True
    return False

"""Requests that replace a named resource, say they overwrite, or only fetch a login token.

Principle (IDEM006, round 29b): what a request does again is in its URL and body, not its verb alone.

- **A PUT to a named resource replaces it.** A PUT whose URL names one resource at run time (a path
  segment holding a value, after a collection's segment: ``f"{base}/coveragestores/{store}"``,
  ``f"{base}/layers/ws:{layer}"``), perhaps followed by one fixed sub-resource of it that is no
  collection (``/file.geotiff``, ``/ownership``), sends that resource's whole representation (HTTP's
  own definition of PUT): sent again, the same representation stands there (GeoServer's REST PUT of a
  raster to its coverage store, of a layer's default style; GeoNetwork's ``records/{uuid}/ownership``).
  Information, with the cause. Still a finding: a PUT to a collection (``/items``, a last segment with
  no value in it or a plural after it), a URL held in a name this function does not build, and a body
  that is a dict of fields, which `fieldsets` judges (mozilla's ``PUT bug/{id}`` of a whiteboard its
  caller built from the one it read stays raised).
- **An upload that says it overwrites.** A request whose parameters or body carry an overwrite
  instruction (``uuidProcessing="OVERWRITE"``, ``mode="replace"``, ``overwrite=True``,
  ``upsert=True``) replaces the record of the same id on a second send (GeoNetwork's record upload).
  ``GENERATEUUID``, ``NOTHING``, ``append`` or ``overwrite=False`` stay a finding.
- **A POST that only fetches a token** (`reads` has the URL's side): a POST whose body carries a
  password or a client secret (``{"username": .., "password": ..}``, ``grant_type``) and whose
  response the function reads only for a token (``response.json()["accessToken"]``) logs in: a second
  one gets another token and changes no data. A POST that carries a password but whose response is
  read for anything else (an ``id``: a user it created) stays a finding.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.syntax import (
    BODY_KEYWORDS,
    assigned_values,
    dict_literal,
    request_body,
    request_url,
)

__all__ = ["fetches_token", "replaces_named", "says_overwrite"]

#: a fixed trailing segment naming a collection: a plural (``items``; not ``status``/``address``)
_PLURAL = re.compile(r"[a-z](?<![su])s$", re.I)
#: a segment of a resource URL that asks for an action rather than names a sub-resource
_ACTION = re.compile(r"send|e-?mail|notif|push|message|sms|run|execute|trigger|start|append|add", re.I)
#: a parameter or body key that instructs an overwrite, and the values that do
_OVERWRITE_KEY = re.compile(r"^(?:\w*processing|mode|on_?conflict|if_?exists|write_?mode|conflict\w*)$", re.I)
_OVERWRITE_VALUE = re.compile(r"^(?:overwrite|replace|upsert|update)$", re.I)
_OVERWRITE_FLAG = re.compile(r"^(?:overwrite|upsert|replace)$", re.I)
#: a body key carrying a secret that logs in
_SECRET_KEY = re.compile(r"^(?:password|passwd|client_secret|grant_type)$", re.I)
#: a response key holding a credential (``accessToken``, ``xsrfToken``, ``expires_in``, ``setCookieHeader``)
_TOKEN_KEY = re.compile(r"token|expires|scope|session|cookie|csrf", re.I)


def replaces_named(call: ast.Call, method: str, fn: ast.AST) -> str | None:
    """Why sending this PUT again leaves the same resource (module doc), or None."""
    if method != "put":
        return None
    body = request_body(call)
    if body is not None and dict_literal(body, fn) is not None:
        return None  # a dict of fields: `fieldsets` decides, with its read-modify-write guards
    url = request_url(call)
    built = assigned_values(fn, url.id) if isinstance(url, ast.Name) else [url]
    shown = [_named_segment(u) for u in built]
    named = shown[0] if shown and all(shown) else None
    if named is None:
        return None
    return (
        f"it PUTs to a URL that names one resource ({named}): sent again, the same representation "
        "replaces it (a PUT's own definition)"
    )


def says_overwrite(call: ast.Call, fn: ast.AST) -> str | None:
    """The overwrite instruction the request's parameters or body carry (module doc), or None."""
    for kw in call.keywords:
        if kw.arg != "params" and kw.arg not in BODY_KEYWORDS:
            continue
        fields = dict_literal(kw.value, fn)
        if fields is None:
            continue
        for key, value in zip(fields.keys, fields.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            if not isinstance(value, ast.Constant):
                continue
            if (
                _OVERWRITE_KEY.search(key.value)
                and isinstance(value.value, str)
                and _OVERWRITE_VALUE.search(value.value)
            ) or (_OVERWRITE_FLAG.search(key.value) and value.value in (True, "true", "True")):
                return (
                    f"the request says it overwrites ({key.value}={value.value!r}): sent again, it "
                    "replaces the record of the same id"
                )
    return None


def fetches_token(call: ast.Call, fn: ast.AST) -> bool:
    """This POST sends a secret and its response is read only for a token (module doc)."""
    body = request_body(call)
    fields = dict_literal(body, fn) if body is not None else None
    if fields is None or not any(
        isinstance(k, ast.Constant) and isinstance(k.value, str) and _SECRET_KEY.search(k.value)
        for k in fields.keys
    ):
        return False
    names = _response_names(call, fn)
    keys = _read_keys(fn, names)
    return bool(keys) and all(_TOKEN_KEY.search(k) for k in keys)


def _named_segment(url: ast.expr | None) -> str | None:
    """The segment of an f-string URL that names one resource, shown as written, or None."""
    if isinstance(url, ast.BinOp) and isinstance(url.op, ast.Add):
        url = url.right
    if not isinstance(url, ast.JoinedStr):
        return None
    text = "".join(str(p.value) if isinstance(p, ast.Constant) else "\0" for p in url.values).split("?")[0]
    segments = text.rstrip("/").split("/")
    last_valued = max((i for i, s in enumerate(segments) if "\0" in s), default=None)
    if last_valued is None or last_valued == 0:
        return None  # no value in the path, or only the base URL's
    before = segments[last_valued - 1]
    if not before or "\0" in before or _ACTION.fullmatch(before):
        return None  # ``{base}/{collection}``: no collection segment names what the value is
    after = segments[last_valued + 1 :]
    if len(after) > 1 or any(not s or _PLURAL.search(s) or _ACTION.search(s) for s in after):
        return None
    shown = "/".join([before, segments[last_valued].replace("\0", "{..}"), *after])
    return shown


def _response_names(call: ast.Call, fn: ast.AST) -> set[str]:
    """The names the response is bound to, and those bound to its ``.json()``."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and node.value is call:
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "json"
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id in names
        ):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _read_keys(fn: ast.AST, names: set[str]) -> list[str]:
    """The keys read from the response (``r["k"]``, ``r.get("k")``, ``r.json()["k"]``)."""
    keys: list[str] = []

    def holder(node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in names
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "json"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in names
        )

    for node in ast.walk(fn):
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript) and holder(node.value):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and holder(node.func.value)
            and node.args
        ):
            key = node.args[0]
        if key is not None:
            keys.append(key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "")
    return keys

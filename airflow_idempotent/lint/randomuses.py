"""Where a random value goes: IDEM003's randomness is a defect only where it names what is written
(issue 35, round 36e, lint60; evidence in docs/lint-evaluation.md).

Principle: a rerun draws another random value; that loses or doubles data only where the value
becomes part of the name of something written or read back, such as an object's key under the
run's partition (``object_name=f"/{partition_prefix}/{uuid4()}"``: a rerun adds a second file, and
the table over that folder holds the day twice). Every useful randomness label of the labelled
rounds (77, all held out) is such a built name. A value used whole (an id, a salt, a session or
request id, a sampled or chosen item) names no file or folder: a rerun draws
another id for the same work, which is information. The value is followed by `textuse.value_ends`
(the one "where does this value go" walk) with a sink that asks only "is it built into a text or a
path, or given as a path, key or name?"; a value returned, or a walk that cannot end, keeps the
finding (recall is not traded for it).
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.pyfacts import clock_calls_at, is_random, parents
from airflow_idempotent.lint.syntax import dotted, last_name
from airflow_idempotent.lint.textuse import PASS, value_ends

__all__ = ["RANDOM_INFO_TAIL", "random_use"]

#: what the information says would make the random value a defect
RANDOM_INFO_TAIL = (
    "a rerun draws another value for the same work, and no file, folder, key or path is named by it, "
    "so it is not raised as a defect; it would be one if the value were built into the name of an object, "
    "file or folder written (a rerun then adds a second copy beside the first)"
)

#: calls that only carry the value on as the same value (a conversion, a method of the text)
_CARRY = frozenset({"str", "hex", "upper", "lower", "replace", "strip"})
#: calls that build a text or a path from the value with other parts
_BUILD = frozenset({"format", "join", "Path", "PurePath", "PosixPath"})
#: a keyword, dict key or attribute whose name says the value names a place: a path, key or object
_PLACE = re.compile(r"(?i)(path|file|folder|dir|prefix|key|object|blob|bucket|uri|url|location|dest)")
#: calls that write or place something, whose positional argument may be its name or key
_WRITES = re.compile(
    r"(?i)upload|put|write|save|copy|move|rename|open|mkdir|makedirs|to_(parquet|csv|json)|load_"
)
_NAMED, _WHOLE = "named", "whole"
#: draws whose value, used whole, is an identifier or a pick among given items; a random number
#: (``randint``, ``random()``, ``uniform``) is left a finding: it may be the data itself (round 36e:
#: Airflow's state-store examples simulate a job's row count with ``randint``)
_WHOLE_KINDS = re.compile(
    r"^(uuid\.uuid[1345]|uuid[1345]|secrets\.token_\w+|random\.(choice|choices|sample|shuffle))\("
)
_LIMIT = 3


def random_use(tree: ast.Module | None, line: int) -> str | None:
    """Why the randomness read at `line` of `tree` names nothing a rerun writes (its value is used
    whole: an id, a choice, a sample, a jitter), or None when it may (built into a text or a path,
    given as a path or key, returned, or followed nowhere) or no Python random call is there."""
    if tree is None:
        return None
    parent_of = parents(tree)
    calls = [(call, name) for call, name in clock_calls_at(tree, line) if is_random(name)]
    if not calls or any(not _WHOLE_KINDS.match(name) for _, name in calls):
        return None  # a random number may be data itself (a count of rows, a measurement)
    for call, _ in calls:
        ends = value_ends(call, tree, parent_of, _sink, None, 0, _LIMIT, _WHOLE)
        if not ends or any(end != _WHOLE for end in ends):
            return None
    return "its value is used whole (an id, or an item picked among given ones), never built into a name"


def _sink(parent: ast.AST, child: ast.AST, state: object, _depth: int) -> tuple[object, object]:
    """`value_ends`' sink: a text, path or place-named argument ends it as named; a conversion passes
    it on; a return is not known to end well; anything else uses the value whole."""
    if isinstance(parent, ast.FormattedValue | ast.JoinedStr):
        return _NAMED, state  # an f-string: the value is part of a built text
    if isinstance(parent, ast.BinOp):
        return (_NAMED if isinstance(parent.op, ast.Add | ast.Mod | ast.Div) else _WHOLE), state
    if isinstance(parent, ast.Attribute):
        return PASS, state  # ``uuid4().hex``, ``str(..).replace``: the same value, carried on
    if isinstance(parent, ast.Call):
        name = last_name(dotted(parent.func))
        if child is parent.func:
            return (_NAMED if name in _BUILD else PASS), state
        if name in _BUILD or _WRITES.search(name):
            return _NAMED, state  # built into a text or path, or given to a call that writes or places
        if name in _CARRY:
            return PASS, state
        return _WHOLE, state
    if isinstance(parent, ast.keyword):
        return (_NAMED if parent.arg and _PLACE.search(parent.arg) else _WHOLE), state
    if isinstance(parent, ast.Dict):
        key = next((k for k, v in zip(parent.keys, parent.values, strict=False) if v is child), None)
        text = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else ""
        return (_NAMED if _PLACE.search(text) else _WHOLE), state
    if isinstance(parent, ast.Return | ast.Yield):
        return None, state  # a helper's value: its callers decide
    return _WHOLE, state

"""A JSON or YAML file of the repository a DAG file loads its arguments from (round 36f, lint61).

``CONFIG = json.load(open("config/dag.json"))`` then ``DAG(.., default_args=CONFIG["default_args"])``
(or ``yaml.safe_load``, ``json.loads(Path(..).read_text())``, ``with open(..) as f: yaml.safe_load(f)``)
gives the DAG the file's ``retries``, ``start_date`` and ``catchup`` as a dict literal written in the
DAG file would. The file is found as a ``.sql`` file is (beside the DAG file, or where a deployed or
working-directory path lands in the checkout); its content becomes that literal, placed at the load
call (the DAG file's line the finding can name). Note that Airflow 2 and 3 take ``catchup`` only as a
DAG argument: one in ``default_args`` is ignored, wherever it is written. A file that is not found,
not valid, or too large is not read: the value stays unknown, as before.
"""

from __future__ import annotations

import ast
import datetime
import json
import posixpath
from pathlib import Path
from typing import Any

from airflow_idempotent.lint.source import deployed_path
from airflow_idempotent.lint.syntax import dotted
from airflow_idempotent.lint.texts import ValueScope, opened_by_with, text_of

__all__ = ["CONFIG_FILE", "CONFIG_LOADS", "config_file", "loaded_config"]

_JSON = frozenset({"json.load", "json.loads"})
_YAML = frozenset({"yaml.safe_load", "yaml.load", "yaml.full_load", "yaml.unsafe_load"})
CONFIG_LOADS = _JSON | _YAML
#: the attribute of a node made from a configuration file that holds the file's path
CONFIG_FILE = "config_file"
_MAX_BYTES = 1_000_000


def loaded_config(scope: ValueScope, call: ast.Call, depth: int = 0) -> ast.expr | None:
    """The literal a ``json.load``/``yaml.safe_load`` call of a project file returns, located at the
    call; None for any other call or a file the linter cannot find or read. `depth`: how far the
    value being followed has come, passed on so that ``data = json.loads(data)`` ends."""
    name = dotted(call.func)
    if name not in CONFIG_LOADS or not call.args:
        return None
    path = _file_of(scope, call.args[0], depth)
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8-sig") if path.stat().st_size <= _MAX_BYTES else None
        data = _parse(text, yaml_file=name in _YAML) if text is not None else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    return _literal(data, call, path)


def config_file(node: ast.AST | None) -> str | None:
    """The file a value of `loaded_config` was read from (its path), None for code written in Python:
    a finding about it names the file and stands at the DAG's line, not at the load call."""
    return getattr(node, CONFIG_FILE, None)


def _file_of(scope: ValueScope, arg: ast.expr, depth: int) -> Path | None:
    """The project file `arg` reads: ``open(P)``, ``f`` of ``with open(P) as f``, ``open(P).read()``,
    ``Path(P).read_text()``."""
    node = arg
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("read", "read_text")
    ):
        node = node.func.value
    if isinstance(node, ast.Name):
        node = opened_by_with(getattr(scope, "tree", None), node) or node
    if (
        isinstance(node, ast.Call)
        and dotted(node.func) in ("open", "io.open", "Path", "pathlib.Path")
        and node.args
    ):
        node = node.args[0]
    named = text_of(scope, node, depth + 1)
    if named is None or named.unresolved or not named.text.endswith((".json", ".yaml", ".yml")):
        return None
    here = scope.source.path
    text = named.text
    beside = here.parent / text
    if not posixpath.isabs(text) and beside.is_file():
        return beside
    found = deployed_path(text if posixpath.isabs(text) else "/" + text, here)
    return found if found is not None and found.is_file() else None


def _parse(text: str, yaml_file: bool) -> Any:
    if not yaml_file:
        return json.loads(text)
    try:
        import yaml  # PyYAML comes with Airflow; without it a YAML file stays unknown
    except ImportError:
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(str(error)) from error


def _literal(value: Any, at: ast.AST, path: Path) -> ast.expr:
    """`value` as the Python literal that would spell it, every node placed at `at`; a date or time
    (YAML reads ``2024-01-01`` as one) as its ISO text, which Airflow parses the same way."""
    node: ast.expr
    if isinstance(value, dict):
        keys: list[ast.expr | None] = [_literal(str(k), at, path) for k in value]
        node = ast.Dict(keys=keys, values=[_literal(v, at, path) for v in value.values()])
    elif isinstance(value, list | tuple):
        node = ast.List(elts=[_literal(v, at, path) for v in value], ctx=ast.Load())
    elif isinstance(value, datetime.date | datetime.time):
        node = ast.Constant(value=value.isoformat())
    elif value is None or isinstance(value, str | int | float | bool):
        node = ast.Constant(value=value)
    else:
        node = ast.Constant(value=str(value))
    setattr(node, CONFIG_FILE, str(path))
    return ast.copy_location(node, at)

"""A repository helper that returns a file's text (``def read_sql(name): with open(DIR / name) as f:
return f.read()``) or its path (``return os.path.join(root, f"queries/{name}.sql")``) (round 36f).

A task that runs ``hook.run(read_sql("load.sql"))`` runs the SQL of that file, as a task whose own
code reads it (``open(path).read()``, `texts`) does. Reading the helper's value needs only its
syntax: the one expression it returns, when that is a file read (``.read()``, ``.read_text()``),
directly or through a local assigned once (``sql = f.read()``; ``return sql``), and the simple
locals it builds the path from (``path = os.path.join(SQL_DIR, name)``). `scope` binds the call's
arguments and those locals; `texts` reads the file (only a ``.sql`` file of the project). Pure
syntax, so `scope` can use it without a cycle. A helper returning a configuration file's content
(``return yaml.safe_load(f)``) is read the same way (`configfiles`).
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.configfiles import CONFIG_LOADS
from airflow_idempotent.lint.syntax import dotted, walk_no_defs

__all__ = ["file_read_return"]

_READS = frozenset({"read", "read_text"})


def file_read_return(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
) -> tuple[ast.expr, list[tuple[str, ast.expr]]] | None:
    """The expression `fn` returns when it is a file's text or a path built from parts, and `fn`'s
    simple locals (one name assigned once, in source order) to read it with; None for any other
    function (more than one ``return``, a value computed otherwise)."""
    returns = [n for n in walk_no_defs(fn) if isinstance(n, ast.Return)]
    if len(returns) != 1 or returns[0].value is None:
        return None
    assigned: dict[str, list[ast.Assign]] = {}
    for node in walk_no_defs(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node)
    once = sorted((v[0] for v in assigned.values() if len(v) == 1), key=lambda n: (n.lineno, n.col_offset))
    expr = returns[0].value
    read = expr
    if isinstance(expr, ast.Name):
        owner = [n.value for n in once if isinstance(n.targets[0], ast.Name) and n.targets[0].id == expr.id]
        read = owner[0] if owner else expr
    if not (_is_read(read) or _is_path(read)):
        return None
    return expr, [(n.targets[0].id, n.value) for n in once if isinstance(n.targets[0], ast.Name)]


def _is_read(node: ast.expr) -> bool:
    """``x.read()`` or ``x.read_text()``, possibly stripped (``.strip()``), or a JSON/YAML load."""
    if isinstance(node, ast.Call) and dotted(node.func) in CONFIG_LOADS:
        return True  # ``return yaml.safe_load(f)``: a configuration file's content (`configfiles`)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
        if node.func.attr in _READS:
            return True
        if node.func.attr in ("strip", "rstrip", "lstrip"):
            return _is_read(node.func.value)
    return False


def _is_path(node: ast.expr) -> bool:
    """A path built from parts (``os.path.join(root, f"queries/{name}.sql")``, ``Path(..) / name``):
    the file a caller then reads (``file_to_string(get_query_filepath("update_table"))``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return True
    return isinstance(node, ast.Call) and dotted(node.func) in (
        "os.path.join",
        "path.join",
        "Path",
        "pathlib.Path",
    )

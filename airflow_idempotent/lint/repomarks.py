"""Stamp columns some SQL of the repository selects by, wherever that SQL is (IDEM001's stamps).

A stamp on rows exported to a file (`exports`) is information only when nothing selects by it. The
rows' table is unknown there (another step loads the file), and the SQL that reads them may sit in
modules the linter makes no task of: rrap-gcp-dags' 723 function modules, which a generator loads by
``importlib`` and turns into tasks, hold ``WHERE INSRT_PROCESS_TMSTMP < last_day(..)`` (round 36's
one useful IDEM001: a late month drops its new customers). So every Python and SQL file of the
repository that names the column is read for SQL comparing it by order or taking its MAX
(`benign.marks_read`): only files that contain the column's name are parsed, and only when a task
stamps exported rows, so a run pays nothing otherwise.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from airflow_idempotent.lint.sqlfacts import analyse_sql

__all__ = ["repository_marks"]

#: folders never holding the repository's own SQL
_SKIP = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages", "venv", ".venv"})
_LARGEST = 2_000_000  # bytes: a larger file is data, not code


def repository_marks(root: Path, columns: Iterable[str]) -> set[str]:
    """Each ``table.column`` (``?.column``: table unknown) that SQL in a file under `root` reads as a
    mark, for the columns among `columns` (lower case)."""
    wanted = {c.lower() for c in columns}
    found: set[str] = set()
    if not wanted or not root.is_dir():
        return found
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".sql") or _skipped(path.relative_to(root).parts):
            continue
        try:
            if path.stat().st_size > _LARGEST:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        present = {c for c in wanted if c in text.lower()}
        if not present:
            continue
        for sql in _sql_texts(path, text, present):
            for stmt in analyse_sql(sql, None).statements:
                found.update(m for m in stmt.marks if m.rpartition(".")[2] in present)
    return found


def _skipped(parts: tuple[str, ...]) -> bool:
    return any(p.startswith(".") or p in _SKIP for p in parts[:-1])


def _sql_texts(path: Path, text: str, columns: set[str]) -> Iterator[str]:
    """The SQL of a .sql file, or each string of a Python module that names one of `columns` (an
    f-string's holes read as names)."""
    if path.suffix == ".sql":
        yield text
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if id(node) in parts:
            continue  # a piece of an f-string: read whole below
        if isinstance(node, ast.JoinedStr):
            value = "".join(
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "idem_hole"
                for v in node.values
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
        else:
            continue
        if any(c in value.lower() for c in columns):
            yield value

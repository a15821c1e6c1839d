"""Files Airflow never parses: those an ``.airflowignore`` on their way names.

Airflow's DAG processor skips every file and folder an ``.airflowignore`` matches (the file's
patterns hold for its folder and every folder below it). A repository keeps old DAGs under such a
folder (smu-chile's ``dags/deprecated/``, ignored by ``deprecated/*``, round 22): they never run, so
their writes are no rerun problem and pair with no live task's. The patterns' syntax is the
deployment's ``[core] dag_ignore_file_syntax`` (``glob`` since Airflow 3, ``regexp`` before); the
linter does not know the deployment, so a path is ignored only when both syntaxes ignore it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

try:  # pathspec 1.x; Airflow's own GitWildMatchPattern is its deprecated older name
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern as _Pattern
except ImportError:  # pragma: no cover - pathspec < 1.0
    from pathspec.patterns import GitWildMatchPattern as _Pattern

__all__ = ["ignored_by_airflow"]

_NAME = ".airflowignore"
_COMMENT = re.compile(r"\s*#.*")


@lru_cache(maxsize=1024)
def _patterns(folder: Path) -> tuple[str, ...]:
    """The patterns of `folder`'s ``.airflowignore`` (comments and blank lines dropped)."""
    path = folder / _NAME
    if not path.is_file():
        return ()
    lines = (_COMMENT.sub("", line) for line in path.read_text(errors="replace").split("\n"))
    return tuple(line for line in lines if line.strip())


def _regexp_ignores(path: Path, rules: list[tuple[Path, str]]) -> bool:
    """Airflow's ``regexp`` syntax: a pattern searched in the path relative to the ignore file's
    folder (Airflow takes the DAG folder, where the top ignore file usually sits)."""
    for base, pattern in rules:
        try:
            if re.search(pattern, path.relative_to(base).as_posix()) is not None:
                return True
        except re.error:
            continue
    return False


def _glob_ignores(path: Path, rules: list[tuple[Path, str]], is_dir: bool) -> bool:
    """Airflow's ``glob`` syntax (gitignore's): later patterns win, ``!`` re-includes, a pattern
    with a slash is relative to its ignore file's folder, one without matches the name alone."""
    matched = False
    for base, pattern in rules:
        if pattern.strip() == "/":
            continue
        raw = pattern.lstrip("!")
        if raw.rstrip() != raw.rstrip().rstrip("/") and not is_dir:
            continue
        rel = path.relative_to(base).as_posix() if "/" in pattern.rstrip("/") else path.name
        compiled = _Pattern(pattern)
        if compiled.include is not None and compiled.match_file(rel + "/" if is_dir else rel) is not None:
            matched = compiled.include
    return matched


def ignored_by_airflow(candidate: Path, root: Path) -> bool:
    """`candidate` (a file under the folder `root` the linter was given) or a folder on its way is
    matched by an ``.airflowignore`` in `root` or below, under both pattern syntaxes."""
    try:
        parts = candidate.relative_to(root).parts
    except ValueError:
        return False
    rules: list[tuple[Path, str]] = []
    folder = root
    for index, part in enumerate(parts):
        rules.extend((folder, p) for p in _patterns(folder))
        target = folder / part
        is_dir = index < len(parts) - 1
        if rules and _regexp_ignores(target, rules) and _glob_ignores(target, rules, is_dir):
            return True
        folder = target
    return False

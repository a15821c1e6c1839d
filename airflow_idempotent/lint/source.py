"""The files the linter reads: DAG files found in folders, modules found on disk, and the text of both.

Nothing is imported or executed: a `Source` is a file's text and its acknowledgement comments, and a
`Located` string knows which file lines spell it, so a finding is placed where it is written.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from airflow_idempotent.lint.rules import rule_id

__all__ = ["Located", "Source", "dag_files", "module_path"]

_ACK_RE = re.compile(
    r"(?:#|--)\s*idempotent:\s*ack\s+"
    r"(?P<rules>[A-Za-z0-9-]+(?:\s*,\s*[A-Za-z0-9-]+)*)[ \t]*(?P<reason>[^\n]*)",
    re.IGNORECASE,
)


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


class Source:
    """One file read from disk: its text, lines and acknowledgements."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.display = _display(path)
        self.text = text
        self.lines = text.splitlines()
        self.acks: dict[int, dict[str, str]] = {}
        for number, line in enumerate(self.lines, start=1):
            for match in _ACK_RE.finditer(line):
                reason = match.group("reason").strip()
                for token in re.split(r"\s*,\s*", match.group("rules").strip()):
                    rule = rule_id(token)
                    if rule is not None:
                        self.acks.setdefault(number, {})[rule] = reason

    def span(self, first: int, last: int) -> str:
        return "\n".join(self.lines[first - 1 : last])


class Located:
    """A string value (SQL, a bash command) and the pieces of source files that spell it.

    A value assembled from several constants (``TARGET + SOURCE``, an imported constant) has one
    span per piece, in order; searches run over the pieces' source text joined in that order, so a
    match is placed on the file and line where it is written.
    """

    def __init__(self, text: str, spans: Sequence[tuple[Source, int, int]]) -> None:
        self.text = text
        self.spans = tuple(spans)
        parts: list[str] = []
        self._starts: list[tuple[int, Source, int]] = []
        offset = 0
        for source, first, last in self.spans:
            chunk = source.span(first, last)
            self._starts.append((offset, source, first))
            parts.append(chunk)
            offset += len(chunk) + 1
        self.raw = "\n".join(parts)

    @property
    def source(self) -> Source:
        return self.spans[0][0]

    @property
    def first(self) -> int:
        return self.spans[0][1]

    def find(self, *patterns: str, start: int = 0) -> int | None:
        """Offset of the first pattern (regex, case-insensitive) found at or after `start`."""
        for pattern in patterns:
            match = re.compile(pattern, re.IGNORECASE | re.DOTALL).search(self.raw, start)
            if match is not None:
                return match.start()
        return None

    def place(self, offset: int | None) -> tuple[str, int]:
        """(file, line) of an offset of the joined source text; the first line when None."""
        if offset is not None:
            for begin, source, first in reversed(self._starts):
                if offset >= begin:
                    return source.display, first + self.raw[begin:offset].count("\n")
        return self.source.display, self.first

    def locate(self, *patterns: str, start: int = 0) -> tuple[str, int]:
        return self.place(self.find(*patterns, start=start))


def _looks_like_dag_file(path: Path) -> bool:
    """Airflow's own safe-mode test: both 'airflow' and 'dag' appear in the file."""
    try:
        head = path.read_bytes()
    except OSError:
        return False
    lower = head.lower()
    return b"airflow" in lower and b"dag" in lower


def dag_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files to lint: each named file, and the DAG files of each named folder (hidden ones skipped)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for candidate in sorted(path.rglob("*.py")):
                parts = candidate.relative_to(path).parts
                if any(p.startswith(".") or p == "__pycache__" for p in parts):
                    continue
                if _looks_like_dag_file(candidate):
                    files.append(candidate)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or directory: {raw}")
    return files


def module_path(module: str, level: int, importer: Path) -> Path | None:
    """Where `module` lives on disk, found without importing it (or any package above it)."""
    parts = [p for p in module.split(".") if p]
    roots: list[Path] = []
    if level > 0:
        base = importer.parent
        for _ in range(level - 1):
            base = base.parent
        roots.append(base)
    else:
        roots.append(importer.parent)
        roots.extend(Path(p) for p in sys.path if p)
        if parts:
            with contextlib.suppress(ImportError, ValueError, AttributeError):
                spec = importlib.util.find_spec(parts[0])  # a top-level name: located, not imported
                if spec is not None and spec.submodule_search_locations:
                    roots.extend(Path(loc).parent for loc in spec.submodule_search_locations)
    for root in roots:
        target = root.joinpath(*parts) if parts else root
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None

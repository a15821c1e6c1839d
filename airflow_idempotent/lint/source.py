"""The files the linter reads: DAG files found in folders, modules found on disk, and the text of both.

Nothing is imported or executed: a `Source` is a file's text and its acknowledgement comments, and a
`Located` string knows which file lines spell it, so a finding is placed where it is written.
"""

from __future__ import annotations

import bisect
import contextlib
import importlib.util
import os
import re
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path

from airflow_idempotent.lint.airflowignore import ignored_by_airflow
from airflow_idempotent.lint.rules import rule_id

__all__ = [
    "UNRESOLVED",
    "Located",
    "Mark",
    "Source",
    "dag_files",
    "deployed_path",
    "found_file",
    "is_project_file",
    "is_unresolved",
    "module_path",
    "root_relative",
    "shown",
]

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


def root_relative(path: Path, roots: Sequence[Path]) -> str:
    """`path` named from the linted folder that holds it (the innermost path argument), so a message
    naming another file reads ``mg/dag.py``, not ``../../../tmp/tree/mg/dag.py``, wherever the run
    started; a file under no argument keeps its working-directory name."""
    holders = [r for r in roots if path.is_relative_to(r)]
    if not holders:
        return _display(path)
    return path.relative_to(max(holders, key=lambda r: len(r.parts))).as_posix()


class Source:
    """One file read from disk: its text, lines and acknowledgements."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.display = _display(path)
        #: the name other files' messages give it: relative to the linted folder (`Workspace.source`)
        self.named = self.display
        self.text = text
        self.lines = text.splitlines()
        starts, at = [0], 0
        for line in text.splitlines(keepends=True):
            at += len(line)
            starts.append(at)
        self._line_starts = starts
        self.acks: dict[int, dict[str, str]] = {}
        for number, line in enumerate(self.lines, start=1):
            for match in _ACK_RE.finditer(line):
                reason = match.group("reason").strip()
                for token in re.split(r"\s*,\s*", match.group("rules").strip()):
                    rule = rule_id(token)
                    if rule is not None:
                        self.acks.setdefault(number, {})[rule] = reason

    def offset(self, lineno: int, col_offset: int) -> int:
        """The text offset of a syntax tree position (1-based line, UTF-8 byte column)."""
        index = min(max(lineno, 1), len(self._line_starts)) - 1
        line = self.lines[index] if index < len(self.lines) else ""
        column = len(line.encode("utf-8")[:col_offset].decode("utf-8", errors="ignore"))
        return self._line_starts[index] + column

    def line_of(self, offset: int) -> int:
        """The 1-based line of a text offset."""
        return max(1, min(bisect.bisect_right(self._line_starts, offset), len(self.lines)))


Mark = tuple[int, Source, int, int]
"""(offset in a value's text, source file, line where the text from that offset is written, last line
the piece may reach): where a piece of a string value is spelled."""

UNRESOLVED = "idem_py_"
"""Prefix of the name standing for a Python value the linter cannot know (a function's argument,
a value computed at run time) inside a string it reads; `shown` turns it back into ``{name}``."""
_UNRESOLVED_RE = re.compile(UNRESOLVED + r"(\w*)")


def shown(text: str) -> str:
    """`text` as a person wrote it: names standing for unknown Python values shown as ``{name}``."""
    return _UNRESOLVED_RE.sub(lambda m: "{" + m.group(1) + "}", text)


def is_unresolved(text: str) -> bool:
    """The text holds a Python value the linter cannot know (so, e.g., a table name is not a name)."""
    return UNRESOLVED in text


class Located:
    """A string value (SQL, a bash command) and where each piece of it is written.

    A value assembled from several pieces (implicitly concatenated literals, ``TARGET + SOURCE``, an
    f-string, an imported constant, a ``.sql`` file) keeps one mark per piece, so an offset of the
    value (a statement, a function call sqlglot found) is placed on the file and line that spell it.
    """

    def __init__(self, text: str, marks: Sequence[Mark]) -> None:
        self.text = text
        self.marks = sorted(marks, key=lambda m: m[0])

    @classmethod
    def of_file(cls, source: Source) -> Located:
        """A whole file's text (a ``.sql`` file)."""
        return cls(source.text, [(0, source, 1, max(1, len(source.lines)))])

    @property
    def source(self) -> Source:
        return self.marks[0][1]

    @property
    def first(self) -> int:
        return self.marks[0][2]

    @property
    def unresolved(self) -> bool:
        return is_unresolved(self.text)

    def place(self, offset: int | None) -> tuple[str, int]:
        """(file, line) of an offset of the text; the first piece's line when None."""
        if offset is not None:
            for begin, source, line, last in reversed(self.marks):
                if offset >= begin:
                    return source.display, min(line + self.text.count("\n", begin, offset), last)
        return self.source.display, self.first

    def find(self, *patterns: str, start: int = 0) -> int | None:
        """Offset of the first pattern (regex, case-insensitive) found in the text at or after `start`."""
        for pattern in patterns:
            match = re.compile(pattern, re.IGNORECASE | re.DOTALL).search(self.text, start)
            if match is not None:
                return match.start()
        return None

    def locate(self, *patterns: str, start: int = 0) -> tuple[str, int]:
        return self.place(self.find(*patterns, start=start))

    def slice(self, start: int, end: int | None = None) -> Located:
        """The located text[start:end] (what ``.strip()`` leaves, or one statement of a script)."""
        stop = len(self.text) if end is None else end
        marks: list[Mark] = []
        carried: Mark | None = None
        for begin, source, line, last in self.marks:
            if begin <= start:
                carried = (0, source, min(line + self.text.count("\n", begin, start), last), last)
            elif begin < stop:
                marks.append((begin - start, source, line, last))
        return Located(self.text[start:stop], ([carried] if carried else []) + marks or self.marks[:1])

    @staticmethod
    def join(pieces: Sequence[Located | str]) -> Located | None:
        """One located text of pieces in order (a plain str piece, e.g. a separator, has no mark)."""
        text: list[str] = []
        marks: list[Mark] = []
        at = 0
        for piece in pieces:
            if isinstance(piece, Located):
                marks.extend((begin + at, source, line, last) for begin, source, line, last in piece.marks)
                text.append(piece.text)
                at += len(piece.text)
            else:
                text.append(piece)
                at += len(piece)
        return Located("".join(text), marks) if marks else None


def _looks_like_dag_file(path: Path) -> bool:
    """Airflow's own safe-mode test: both 'airflow' and 'dag' appear in the file."""
    try:
        head = path.read_bytes()
    except OSError:
        return False
    lower = head.lower()
    return b"airflow" in lower and b"dag" in lower


def dag_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files to lint: each named file, and the DAG files of each named folder (hidden ones and
    those an ``.airflowignore`` names skipped)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for candidate in sorted(path.rglob("*.py")):
                parts = candidate.relative_to(path).parts
                if any(p.startswith(".") or p == "__pycache__" for p in parts):
                    continue
                if ignored_by_airflow(candidate, path):  # never parsed by Airflow: never run
                    continue
                if _looks_like_dag_file(candidate):
                    files.append(candidate)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or directory: {raw}")
    return files


_STDLIB = tuple(
    Path(p).resolve() for key in ("stdlib", "platstdlib") if (p := sysconfig.get_paths().get(key))
)


#: this package: its operators are the linter's catalogue, also when a development install keeps it
#: outside site-packages; its example DAG folders are DAG files like any other
_PACKAGE = Path(__file__).resolve().parents[1]
_PACKAGE_DAGS = frozenset({"examples", "demo_dags"})


def is_project_file(path: Path) -> bool:
    """A file of the DAG's own project, not an installed package, this package's library or the
    standard library: the only modules whose functions and constants the linter follows (an installed
    library's are its own). Round 35b: following a package's re-exports reached this package's
    operators through ``airflow_idempotent.operators``, which the catalogue already names."""
    parts = set(path.parts)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    if path.is_relative_to(_PACKAGE) and path.relative_to(_PACKAGE).parts[0] not in _PACKAGE_DAGS:
        return False
    return not any(path.is_relative_to(lib) for lib in _STDLIB)


def module_path(module: str, level: int, importer: Path) -> Path | None:
    """Where `module` lives on disk, found without importing it (or any package above it).

    Absolute imports are looked for next to the importer and in the two folders above it (an Astro
    project's ``include`` package sits beside ``dags/``, its parent is on Airflow's path), in a
    ``plugins`` folder beside any of them (on Airflow's path too), then on
    this interpreter's path, then above the package the importer is in (a nested DAG file importing
    its own package by its absolute name).
    """
    parts = [p for p in module.split(".") if p]
    roots: list[Path] = []
    if level > 0:
        base = importer.parent
        for _ in range(level - 1):
            base = base.parent
        roots.append(base)
    else:
        roots.append(importer.parent)
        roots.extend(list(importer.parent.parents)[:2])
        # Airflow puts its plugins folder on the path: ``from http_fetch_operator import ..`` in
        # ``src/dags/x.py`` is ``src/plugins/http_fetch_operator.py`` (round 18, Amsterdam)
        roots.extend(p / "plugins" for p in [importer.parent, *list(importer.parent.parents)[:2]])
        roots.extend(Path(p) for p in sys.path if p)
        if parts:
            with contextlib.suppress(ImportError, ValueError, AttributeError):
                spec = importlib.util.find_spec(parts[0])  # a top-level name: located, not imported
                if spec is not None and spec.submodule_search_locations:
                    roots.extend(Path(loc).parent for loc in spec.submodule_search_locations)
        # last: the folder holding the package the importer itself lives in (``oss_know/dags/x/f.py``
        # importing ``oss_know.libs.m``: that package is importable only if its parent is on the path)
        roots.extend(
            p for p in list(importer.parent.parents)[2:] if parts and p / parts[0] in importer.parents
        )
    for root in roots:
        target = root.joinpath(*parts) if parts else root
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def deployed_path(path: str, near: Path) -> Path | None:
    """A path as the DAG sees it once deployed (``/usr/local/airflow/include/sql/x.sql``, an
    ``$AIRFLOW_HOME``-relative folder), found in the checkout of the DAG file `near`.

    The longest tail of the path that exists below the DAG's folder or one of the three folders above
    it wins: ``include/sql/x.sql`` beside the project's ``dags/``.
    """
    given = Path(path)
    if not given.is_absolute():
        return None
    if given.exists():
        return given
    parts = [p for p in given.parts if p not in ("/", "\\") and not p.endswith(":\\")]
    bases = [near.parent, *list(near.parent.parents)[:3]]
    for first in range(len(parts)):
        tail = parts[first:]
        for base in bases:
            candidate = base.joinpath(*tail)
            if candidate.exists():
                return candidate
    return None


def found_file(name: str, roots: Sequence[Path], near: Path) -> Path | None:
    """A file a DAG file `near` names, in its checkout: an absolute (deployed) path where it lands
    (`deployed_path`), a relative one under the first of `roots` that holds it."""
    if Path(name).is_absolute():
        return deployed_path(name, near)
    for root in roots:
        candidate = (root / name).resolve()
        if candidate.is_file():
            return candidate
    return None

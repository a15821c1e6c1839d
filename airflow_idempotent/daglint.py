"""DAG linter: find the shapes that make a rerun unsafe, by reading DAG files (never running them).

``airflow-idempotent lint PATH...`` parses each DAG file with Python's :mod:`ast` (the file is
never imported or executed), finds its DAGs and tasks, follows the SQL they run (``sql=``
strings, module constants, imported constants, ``.sql`` files next to the DAG or on its
``template_searchpath``, SQL strings that task code passes to ``execute``/``run``) and reports:

========  ===============================  ====================================================
IDEM000   unreadable-dag                   the file is not valid Python
IDEM001   clock-sql                        SQL reads the clock, randomness or a sequence
IDEM002   append-insert                    INSERT with no window delete and no key
IDEM003   clock-in-task-code               ``datetime.now()``, ``date.today()``... in DAG/task code
IDEM004   relative-window                  a window taken as "the last N hours" before now
IDEM005   unbounded-catchup                ``catchup=True`` with no ``end_date``
IDEM006   retried-unkeyed-side-effect      retries on a task sending an effect with no key
IDEM007   target-written-twice             one table written by more than one task
IDEM008   accumulating-update              ``UPDATE t SET x = x + ...``: a running total
========  ===============================  ====================================================

Every finding names its file and line, the cause and the fix. A finding is acknowledged with a
comment ``# idempotent: ack IDEM002 reason`` (``-- idempotent: ack ...`` in SQL) on its line or
the line above (for a task's findings, also on the line that starts the task); acknowledged
findings are listed, not failed. For every task the report answers the three review questions:
if this runs twice, what decides its window, how would we backfill the last 90 days.

SQL goes through :func:`airflow_idempotent.lint.find_nondeterminism` (the same lint the operators
apply before they run) and sqlglot; nothing here duplicates that lint.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlglot import exp

from airflow_idempotent.errors import SqlParseError
from airflow_idempotent.lint import DIALECTS, find_nondeterminism
from airflow_idempotent.lint import Finding as LintFinding
from airflow_idempotent.lint import _parse as parse_statements

__all__ = [
    "RULES",
    "Finding",
    "LintReport",
    "Rule",
    "SqlWrite",
    "TaskReport",
    "lint_paths",
    "main",
    "register",
    "run",
    "sql_writes",
]

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """A stable rule: its ID, short name, what it finds and how to fix it."""

    id: str
    name: str
    summary: str
    fix: str


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "IDEM000",
            "unreadable-dag",
            "the DAG file is not valid Python",
            "fix the syntax error: Airflow cannot import this file, so none of its DAGs run",
        ),
        Rule(
            "IDEM001",
            "clock-sql",
            "SQL reads the clock, randomness or a sequence",
            "compare with the run's window instead: :window_start / :window_end with "
            "PartitionOverwriteOperator or MergeOperator, or {{ data_interval_start }} / {{ ds }} in a "
            "template; if it is truly intended, acknowledge it (or list it in allow_functions=[...])",
        ),
        Rule(
            "IDEM002",
            "append-insert",
            "INSERT with no window delete and no key",
            "write with PartitionOverwriteOperator (delete the window and insert it in one transaction) "
            "or MergeOperator (upsert on a key); in plain SQL, DELETE the window before the INSERT in "
            "the same task, or INSERT .. ON CONFLICT (key) DO UPDATE",
        ),
        Rule(
            "IDEM003",
            "clock-in-task-code",
            "DAG or task code reads the clock or randomness",
            "take dates from the run's context (logical_date, data_interval_start/end, ds) instead "
            "of the clock; a fixed start_date such as pendulum.datetime(2026, 1, 1, tz='UTC')",
        ),
        Rule(
            "IDEM004",
            "relative-window",
            'a window taken as "the last N hours" before now',
            "take the window from the run: data_interval_start / data_interval_end (or the logical "
            "date plus a declared granularity), so a rerun days later reads the same hours",
        ),
        Rule(
            "IDEM005",
            "unbounded-catchup",
            "catchup=True with no end_date: every window since start_date, at once",
            "set catchup=False (Airflow 3's default) and backfill an explicit range with "
            "`airflow backfill create --from-date ... --to-date ...`, or give the DAG an end_date",
        ),
        Rule(
            "IDEM006",
            "retried-unkeyed-side-effect",
            "an automatically retried task sends an effect with no idempotency key",
            "send an idempotency key derived from the run and window (e.g. f'{dag_id}:{ds}') and keep "
            "a ledger of effects done, or set retries=0 on this task",
        ),
        Rule(
            "IDEM007",
            "target-written-twice",
            "one target table is written by more than one task",
            "give each table one writing task (one window write: delete+insert or merge in one "
            "transaction); split the table or combine the tasks",
        ),
        Rule(
            "IDEM008",
            "accumulating-update",
            "UPDATE adds to a column's own value: a running total",
            "recompute the value from the window's source and overwrite it (MergeOperator on the key) "
            "instead of adding to what is there",
        ),
    )
}
_RULE_BY_NAME = {rule.name: rule.id for rule in RULES.values()}

#: Operators of this package, by class name.
_OVERWRITE_OPERATORS = frozenset({"PartitionOverwriteOperator"})
_MERGE_OPERATORS = frozenset({"MergeOperator"})
_PROJECT_OPERATORS = _OVERWRITE_OPERATORS | _MERGE_OPERATORS

#: Names of the run's context that carry its window.
_RUN_NAMES = frozenset(
    {
        "ds",
        "ds_nodash",
        "ts",
        "ts_nodash",
        "ts_nodash_with_tz",
        "logical_date",
        "execution_date",
        "data_interval_start",
        "data_interval_end",
        "prev_ds",
        "next_ds",
        "prev_data_interval_start_success",
        "window_start",
        "window_end",
        "window",
        "partition_key",
        "partition_date",
    }
)

#: How many windows of each kind a "so far" count is made of, for IDEM005.
_PRESETS: dict[str, timedelta | None] = {
    "@hourly": timedelta(hours=1),
    "@daily": timedelta(days=1),
    "@midnight": timedelta(days=1),
    "@weekly": timedelta(days=7),
    "@monthly": timedelta(days=30.44),
    "@quarterly": timedelta(days=91.31),
    "@yearly": timedelta(days=365.25),
    "@annually": timedelta(days=365.25),
    "@once": None,
    "@continuous": None,
}

_ACK_RE = re.compile(
    r"(?:#|--)\s*idempotent:\s*ack\s+"
    r"(?P<rules>[A-Za-z0-9-]+(?:\s*,\s*[A-Za-z0-9-]+)*)[ \t]*(?P<reason>[^\n]*)",
    re.IGNORECASE,
)
_JINJA_EXPR = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_JINJA_OTHER = re.compile(r"\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_RELATIVE_MODIFIER = re.compile(
    r"'\s*[+-]?\s*\d+(?:\.\d+)?\s*(?:second|minute|hour|day|week|month|year)s?\s*'", re.IGNORECASE
)
#: Operator arguments whose templates are read elsewhere (or are no templates at all).
_NOT_TEMPLATES = frozenset(
    {"sql", "query", "source_snapshot_sql", "bash_command", "task_id", "python_callable", "dag", "conn_id"}
)
_SQL_FILE = re.compile(r"^[^\s;]+\.sql$", re.IGNORECASE)
_KEY_WORDS = re.compile(r"idempot|dedup", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class Finding:
    """One reason a rerun is unsafe: which rule, where, why, and the fix."""

    rule: str
    file: str
    line: int
    message: str
    fix: str
    dag_id: str | None = None
    task_id: str | None = None
    acknowledged: bool = False
    reason: str | None = None
    #: extra (file, line) places where an acknowledgement counts (the task's first line)
    anchors: tuple[tuple[str, int], ...] = ()

    @property
    def name(self) -> str:
        return RULES[self.rule].name

    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "name": self.name,
            "file": self.file,
            "line": self.line,
            "dag_id": self.dag_id,
            "task_id": self.task_id,
            "message": self.message,
            "fix": self.fix,
        }
        if self.acknowledged:
            out["reason"] = self.reason or ""
        return out


@dataclass
class TaskReport:
    """A task as the linter understood it, and its answers to the three review questions."""

    dag_id: str | None
    task_id: str
    file: str
    line: int
    operator: str
    targets: list[str]
    runs_twice: str
    window: str
    backfill: str
    rules: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.dag_id}.{self.task_id}" if self.dag_id else self.task_id

    def as_dict(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "task_id": self.task_id,
            "file": self.file,
            "line": self.line,
            "operator": self.operator,
            "targets": self.targets,
            "rules": self.rules,
            "answers": {
                "if_this_runs_twice": self.runs_twice,
                "what_decides_its_window": self.window,
                "how_to_backfill_90_days": self.backfill,
            },
            "notes": self.notes,
        }


@dataclass
class LintReport:
    """Everything one lint run found."""

    files: list[str]
    findings: list[Finding]
    tasks: list[TaskReport]
    ignored: tuple[str, ...] = ()

    @property
    def failing(self) -> list[Finding]:
        return [f for f in self.findings if not f.acknowledged]

    @property
    def acknowledged(self) -> list[Finding]:
        return [f for f in self.findings if f.acknowledged]

    @property
    def exit_code(self) -> int:
        return 1 if self.failing else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "summary": {
                "files": len(self.files),
                "tasks": len(self.tasks),
                "findings": len(self.failing),
                "acknowledged": len(self.acknowledged),
                "by_rule": _count_by_rule(self.failing),
                "ignored_rules": list(self.ignored),
            },
            "findings": [f.as_dict() for f in self.failing],
            "acknowledged": [f.as_dict() for f in self.acknowledged],
            "tasks": [t.as_dict() for t in self.tasks],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def to_text(self) -> str:
        out: list[str] = []
        for f in self.failing:
            out.append(f"{f.where()}: {f.rule} {f.name}{_task_suffix(f)}: {f.message}")
            out.append(f"    fix: {f.fix}")
        if self.acknowledged:
            if out:
                out.append("")
            out.append("Acknowledged:")
            for f in self.acknowledged:
                reason = f.reason or "(no reason given)"
                out.append(f"  {f.where()}: {f.rule} {f.name}{_task_suffix(f)}: {f.message}")
                out.append(f"    acknowledged: {reason}")
        if self.tasks:
            if out:
                out.append("")
            out.append("Tasks:")
            for t in self.tasks:
                out.append(f"  {t.label}  ({t.file}:{t.line}, {t.operator})")
                out.append(f"    If this runs twice?                      {t.runs_twice}")
                out.append(f"    What decides its window?                 {t.window}")
                out.append(f"    How would we backfill the last 90 days?  {t.backfill}")
                out.extend(f"    note: {note}" for note in t.notes)
        if out:
            out.append("")
        failing, acked = len(self.failing), len(self.acknowledged)
        counts = ", ".join(f"{rule} x{n}" for rule, n in _count_by_rule(self.failing).items())
        out.append(
            f"{failing} finding(s){f' ({counts})' if counts else ''}, {acked} acknowledged; "
            f"{len(self.tasks)} task(s) in {len(self.files)} file(s)."
        )
        return "\n".join(out) + "\n"


def _task_suffix(f: Finding) -> str:
    if f.task_id:
        return f" [{f.dag_id}.{f.task_id}]" if f.dag_id else f" [{f.task_id}]"
    if f.dag_id:
        return f" [{f.dag_id}]"
    return ""


def _count_by_rule(findings: Iterable[Finding]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in sorted(findings, key=lambda f: f.rule):
        counts[f.rule] = counts.get(f.rule, 0) + 1
    return counts


# ---------------------------------------------------------------------------------------------
# Source files and places in them
# ---------------------------------------------------------------------------------------------


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
                    rule = _rule_id(token)
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


def _rule_id(token: str) -> str | None:
    token = token.strip()
    if token.upper() in RULES:
        return token.upper()
    return _RULE_BY_NAME.get(token.lower())


# ---------------------------------------------------------------------------------------------
# Module scopes: constants, functions and imports, resolved without running anything
# ---------------------------------------------------------------------------------------------


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for Name/Attribute chains; calls and subscripts are looked through."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)
    return ""


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _kwargs(call: ast.Call) -> dict[str, ast.expr]:
    return {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}


class Scope:
    """The module-level names of one Python file."""

    def __init__(self, linter: _Linter, source: Source, tree: ast.Module) -> None:
        self.linter = linter
        self.source = source
        self.tree = tree
        self.assigns: dict[str, ast.expr] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.imports: dict[str, tuple[str, str | None, int]] = {}
        for stmt in tree.body:
            self._collect(stmt)

    def _collect(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.assigns[target.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            self.assigns[stmt.target.id] = stmt.value
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            self.functions[stmt.name] = stmt
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                self.imports[alias.asname or alias.name] = (stmt.module or "", alias.name, stmt.level)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                self.imports[local] = (alias.name if alias.asname else local, None, 0)
        elif isinstance(stmt, ast.If | ast.Try):
            for sub in [*stmt.body, *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", [])]:
                self._collect(sub)

    # -- values -------------------------------------------------------------------------------
    def value(self, node: ast.expr | None, _depth: int = 0) -> tuple[ast.expr | None, Scope]:
        """Follow a Name to its module-level value (also across `from x import NAME`)."""
        if node is None or _depth > 8:
            return node, self
        if isinstance(node, ast.Name):
            if node.id in self.assigns:
                return self.value(self.assigns[node.id], _depth + 1)
            imported = self.imports.get(node.id)
            if imported is not None and imported[1] is not None:
                module, name, level = imported
                other = self.linter.module_scope(module, level, self.source.path)
                if other is not None and name in other.assigns:
                    return other.value(ast.Name(id=name, ctx=ast.Load()), _depth + 1)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module_scope = self._module_named(node.value.id)
            if module_scope is not None and node.attr in module_scope.assigns:
                return module_scope.value(ast.Name(id=node.attr, ctx=ast.Load()), _depth + 1)
        return node, self

    def _module_named(self, local: str) -> Scope | None:
        """The scope of a module imported under `local` (import a.b as local / from a import local)."""
        imported = self.imports.get(local)
        if imported is None:
            return None
        module, name, level = imported
        full = module if name is None else (f"{module}.{name}" if module else name)
        return self.linter.module_scope(full, level, self.source.path)

    def resolve_name(self, dotted: str) -> str:
        """`dt.now` -> `datetime.now` when dt was imported as `from datetime import datetime as dt`."""
        head, _, rest = dotted.partition(".")
        imported = self.imports.get(head)
        if imported is None:
            return dotted
        module, name, _level = imported
        real = name if name is not None else module
        return f"{real}.{rest}" if rest else real

    def literal(self, node: ast.expr | None) -> Any:
        """A Python literal (str, int, bool, None, list, dict) or None when it is not one."""
        value, scope = self.value(node)
        if value is None:
            return None
        if isinstance(value, ast.Constant):
            return value.value
        if isinstance(value, ast.List | ast.Tuple):
            return [scope.literal(e) for e in value.elts]
        if isinstance(value, ast.Dict):
            return {
                scope.literal(k): scope.literal(v)
                for k, v in zip(value.keys, value.values, strict=False)
                if k is not None
            }
        if isinstance(value, ast.Call) and _dotted(value.func) == "dict":
            return {k: scope.literal(v) for k, v in _kwargs(value).items()}
        return None

    def mapping(self, node: ast.expr | None) -> dict[str, ast.expr]:
        """A dict literal or dict(...) call as {key: expression}; {} when it is not one."""
        value, scope = self.value(node)
        if isinstance(value, ast.Dict):
            out: dict[str, ast.expr] = {}
            for k, v in zip(value.keys, value.values, strict=False):
                if k is None:  # **other
                    out.update(scope.mapping(v))
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    out[k.value] = v
            return out
        if isinstance(value, ast.Call) and _dotted(value.func) == "dict":
            return _kwargs(value)
        return {}

    def string(self, node: ast.expr | None) -> Located | None:
        """The text of a string expression, with the file lines it stands on; None if not static."""
        value, scope = self.value(node)
        if value is None:
            return None
        spans: list[tuple[Source, int, int]] = []
        text = scope._text(value, spans)
        if text is None or not spans:
            return None
        return Located(text, spans)

    def strings(self, node: ast.expr | None) -> list[Located]:
        """A string, or each string of a list/tuple of strings."""
        value, scope = self.value(node)
        if isinstance(value, ast.List | ast.Tuple):
            return [s for e in value.elts if (s := scope.string(e)) is not None]
        one = self.string(node)
        return [one] if one is not None else []

    def _text(self, node: ast.expr, spans: list[tuple[Source, int, int]], _depth: int = 0) -> str | None:
        """The string value of `node`, recording the source span of each piece in `spans`."""
        if _depth > 8:
            return None
        if isinstance(node, ast.Constant | ast.JoinedStr):
            spans.append((self.source, node.lineno, node.end_lineno or node.lineno))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name | ast.Attribute):
            value, scope = self.value(node)
            if value is node or value is None:
                return None
            return scope._text(value, spans, _depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._text(node.left, spans, _depth + 1)
            right = self._text(node.right, spans, _depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.JoinedStr):
            parts: list[str] = []
            for piece in node.values:
                if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                    parts.append(piece.value)
                elif isinstance(piece, ast.FormattedValue):
                    inner = self._text(piece.value, [], _depth + 1)
                    parts.append(inner if inner is not None else "idem_py_value")
            return "".join(parts)
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in ("textwrap.dedent", "dedent") and node.args:
                return self._text(node.args[0], spans, _depth + 1)
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("strip", "lstrip", "rstrip"):
                return self._text(node.func.value, spans, _depth + 1)
        return None


# ---------------------------------------------------------------------------------------------
# DAGs and tasks found in a file
# ---------------------------------------------------------------------------------------------


@dataclass
class DagDef:
    dag_id: str
    scope: Scope
    line: int
    end_line: int
    kwargs: dict[str, ast.expr]
    default_args: dict[str, ast.expr]
    tasks: list[TaskDef] = field(default_factory=list)

    @property
    def file(self) -> str:
        return self.scope.source.display


@dataclass
class TaskDef:
    task_id: str
    dag: DagDef | None
    scope: Scope
    line: int
    end_line: int
    operator: str
    kwargs: dict[str, ast.expr]
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = field(default_factory=list)
    decorator: str | None = None

    @property
    def dag_id(self) -> str | None:
        return self.dag.dag_id if self.dag else None


def _is_dag_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _last(_dotted(node.func)) == "DAG"


def _decorator_name(node: ast.expr) -> str:
    return _dotted(node.func if isinstance(node, ast.Call) else node)


def _task_decorator(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, dict[str, ast.expr]] | None:
    for deco in fn.decorator_list:
        name = _decorator_name(deco)
        if name == "task" or name.startswith("task."):
            return name, _kwargs(deco) if isinstance(deco, ast.Call) else {}
    return None


def _dag_decorator(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr] | None:
    for deco in fn.decorator_list:
        if _last(_decorator_name(deco)) == "dag":
            return _kwargs(deco) if isinstance(deco, ast.Call) else {}
    return None


class _Collector:
    """Walk a module and collect its DAGs and their tasks, the way Airflow would attach them."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.dags: list[DagDef] = []
        self.loose: list[TaskDef] = []  # tasks outside any DAG
        self.dag_vars: dict[str, DagDef] = {}
        self.taskflow: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, dict[str, ast.expr]]] = {}
        self.used_ids: dict[tuple[str | None, str], int] = {}

    def collect(self) -> None:
        self._body(self.scope.tree.body, None, "")

    def _new_dag(
        self,
        call_kwargs: dict[str, ast.expr],
        line: int,
        default_id: str,
        node: ast.AST,
        args: list[ast.expr],
    ) -> DagDef:
        dag_id = self.scope.literal(call_kwargs.get("dag_id") or (args[0] if args else None))
        dag = DagDef(
            dag_id=dag_id if isinstance(dag_id, str) else default_id,
            scope=self.scope,
            line=line,
            end_line=getattr(node, "end_lineno", None) or line,
            kwargs=call_kwargs,
            default_args=self.scope.mapping(call_kwargs.get("default_args")),
        )
        self.dags.append(dag)
        return dag

    def _body(self, body: Sequence[ast.stmt], dag: DagDef | None, group: str) -> None:
        for stmt in body:
            self._stmt(stmt, dag, group)

    def _stmt(self, stmt: ast.stmt, dag: DagDef | None, group: str) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            taskflow = _task_decorator(stmt)
            if taskflow is not None:
                self.taskflow[stmt.name] = (stmt, taskflow[0], taskflow[1])
                return
            dag_kwargs = _dag_decorator(stmt)
            if dag_kwargs is not None:
                deco = next(d for d in stmt.decorator_list if _last(_decorator_name(d)) == "dag")
                inner = self._new_dag(dag_kwargs, stmt.lineno, stmt.name, deco, [])
                saved = dict(self.taskflow)
                self._body(stmt.body, inner, "")
                self.taskflow = saved
            return
        if isinstance(stmt, ast.ClassDef):
            return
        if isinstance(stmt, ast.With | ast.AsyncWith):
            inner_dag, inner_group = dag, group
            for item in stmt.items:
                ctx = item.context_expr
                if _is_dag_call(ctx):
                    assert isinstance(ctx, ast.Call)
                    inner_dag = self._new_dag(
                        _kwargs(ctx), ctx.lineno, f"<dag at line {ctx.lineno}>", ctx, list(ctx.args)
                    )
                    if isinstance(item.optional_vars, ast.Name):
                        self.dag_vars[item.optional_vars.id] = inner_dag
                elif isinstance(ctx, ast.Call) and _last(_dotted(ctx.func)) == "TaskGroup":
                    gid = self.scope.literal(
                        _kwargs(ctx).get("group_id") or (ctx.args[0] if ctx.args else None)
                    )
                    if isinstance(gid, str):
                        inner_group = f"{group}{gid}."
                else:
                    self._expr(ctx, dag, group)
            self._body(stmt.body, inner_dag, inner_group)
            return
        if isinstance(stmt, ast.Assign) and _is_dag_call(stmt.value):
            assert isinstance(stmt.value, ast.Call)
            new = self._new_dag(
                _kwargs(stmt.value),
                stmt.value.lineno,
                f"<dag at line {stmt.lineno}>",
                stmt.value,
                list(stmt.value.args),
            )
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.dag_vars[target.id] = new
            return
        if isinstance(stmt, ast.If | ast.For | ast.While | ast.Try):
            for name in ("test", "iter"):
                if isinstance(getattr(stmt, name, None), ast.expr):
                    self._expr(getattr(stmt, name), dag, group)
            for part in ("body", "orelse", "finalbody"):
                self._body(getattr(stmt, part, []), dag, group)
            for handler in getattr(stmt, "handlers", []):
                self._body(handler.body, dag, group)
            return
        for node in ast.iter_child_nodes(stmt):
            if isinstance(node, ast.expr):
                self._expr(node, dag, group)

    def _expr(self, node: ast.expr, dag: DagDef | None, group: str) -> None:
        for sub in _walk_no_defs(node):
            if isinstance(sub, ast.Call):
                self._call(sub, dag, group)

    def _call(self, call: ast.Call, dag: DagDef | None, group: str) -> None:
        kwargs = _kwargs(call)
        func = call.func
        if "task_id" in kwargs and not _is_dag_call(call):
            operator = _dotted(func)
            if isinstance(func, ast.Attribute) and func.attr == "partial":
                operator = _dotted(func.value)
            if _last(operator) == "override":
                return  # fn.override(task_id=...)(...): handled with the call it wraps
            task_id = self.scope.literal(kwargs["task_id"])
            if not isinstance(task_id, str):
                task_id = f"<{ast.unparse(kwargs['task_id'])}>"
            owner = self._owner(kwargs, dag)
            task = TaskDef(
                task_id=group + task_id,
                dag=owner,
                scope=self.scope,
                line=call.lineno,
                end_line=call.end_lineno or call.lineno,
                operator=_last(operator),
                kwargs=kwargs,
            )
            callable_ = kwargs.get("python_callable")
            if isinstance(callable_, ast.Lambda):
                task.functions.append(callable_)
            elif isinstance(callable_, ast.Name) and callable_.id in self.scope.functions:
                task.functions.append(self.scope.functions[callable_.id])
            self._add(task)
            return
        # TaskFlow: fn(...), fn.override(...)(...), fn.partial(...).expand(...)
        name, overrides = None, {}
        if isinstance(func, ast.Name):
            name = func.id
        elif (
            isinstance(func, ast.Call)
            and isinstance(func.func, ast.Attribute)
            and func.func.attr == "override"
        ):
            name, overrides = _dotted(func.func.value), _kwargs(func)
        elif isinstance(func, ast.Attribute) and func.attr == "partial":
            name = _dotted(func.value)
        if name is None or name not in self.taskflow:
            return
        fn, decorator, deco_kwargs = self.taskflow[name]
        merged = {**deco_kwargs, **overrides}
        explicit = self.scope.literal(merged.get("task_id"))
        base = group + (explicit if isinstance(explicit, str) else fn.name)
        owner = self._owner(merged, dag)
        key = (owner.dag_id if owner else None, base)
        count = self.used_ids.get(key, 0)
        self.used_ids[key] = count + 1
        task_id = base if count == 0 else f"{base}__{count}"
        self._add(
            TaskDef(
                task_id=task_id,
                dag=owner,
                scope=self.scope,
                line=call.lineno,
                end_line=call.end_lineno or call.lineno,
                operator=f"@{decorator}",
                kwargs={**merged, **kwargs},
                functions=[fn],
                decorator=decorator,
            )
        )

    def _owner(self, kwargs: dict[str, ast.expr], dag: DagDef | None) -> DagDef | None:
        ref = kwargs.get("dag")
        if isinstance(ref, ast.Name) and ref.id in self.dag_vars:
            return self.dag_vars[ref.id]
        return dag

    def _add(self, task: TaskDef) -> None:
        if task.dag is not None:
            task.dag.tasks.append(task)
        else:
            self.loose.append(task)


def _walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk in source order, not entering function, lambda or class bodies."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children = [
            child
            for child in ast.iter_child_nodes(current)
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef)
        ]
        stack.extend(reversed(children))


# ---------------------------------------------------------------------------------------------
# SQL
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SqlWrite:
    """A table a SQL statement changes, and how: the harness uses this to find a task's targets."""

    table: str
    how: str
    """overwrite, delete, truncate, replace, upsert, merge, keyed-insert, append, update, accumulate"""
    detail: str


@dataclass
class _Statement:
    kind: str
    writes: list[SqlWrite]
    clock: list[LintFinding]  # reads of the clock, randomness or a sequence
    relative: list[LintFinding]  # clock reads shifted by a span: "the last N hours"
    placeholders: list[str]
    high_water: str | None = None
    key: str | None = None
    #: clock reads in WHERE / JOIN / HAVING: they decide which rows the window is
    filtering: set[LintFinding] = field(default_factory=set)


@dataclass
class _SqlFacts:
    statements: list[_Statement]
    dialect: str | None
    error: str | None
    jinja: list[str]


_ARITHMETIC: tuple[type[exp.Expression], ...] = tuple(
    cls
    for name in (
        "Add",
        "Sub",
        "DateAdd",
        "DateSub",
        "DatetimeAdd",
        "DatetimeSub",
        "TimestampAdd",
        "TimestampSub",
        "TimeAdd",
        "TimeSub",
        "TsOrDsAdd",
    )
    if (cls := getattr(exp, name, None)) is not None
)


def _table_name(node: exp.Expression | None) -> str | None:
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table) or not node.name:
        return None
    parts = [p for p in (node.args.get("catalog"), node.args.get("db")) if p]
    names = [p.name for p in parts if isinstance(p, exp.Expression)] + [node.name]
    return ".".join(names).lower()


def _strip_jinja(sql: str) -> tuple[str, list[str]]:
    """SQL with Jinja expressions replaced by identifiers (they parse inside or outside quotes)."""
    found: list[str] = []

    def repl(match: re.Match[str]) -> str:
        found.append(match.group(1).strip())
        return f"idem_jinja_{len(found)}"

    text = _JINJA_EXPR.sub(repl, sql)
    return _JINJA_OTHER.sub(" ", text), found


@contextlib.contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _parse_any(sql: str, dialects: Sequence[str]) -> tuple[list[exp.Expression], str | None, str | None]:
    """Parse with the first dialect that reads every statement; else each `;`-chunk on its own."""
    error: str | None = None
    with _quiet_sqlglot():
        for dialect in dialects:
            try:
                return parse_statements(sql, dialect), dialect, None
            except SqlParseError as err:
                error = error or str(err)
        statements: list[exp.Expression] = []
        for chunk in sql.split(";"):
            if not chunk.strip():
                continue
            for dialect in dialects:
                try:
                    statements.extend(parse_statements(chunk, dialect))
                    break
                except SqlParseError:
                    continue
    return statements, (dialects[0] if statements else None), error


def _analyse_sql(sql: str, dialect: str | None) -> _SqlFacts:
    text, jinja = _strip_jinja(sql)
    dialects = (dialect,) if dialect else DIALECTS
    statements, used, error = _parse_any(text, dialects)
    facts = _SqlFacts([], used, error if not statements else None, jinja)
    if not statements:
        facts.statements.extend(_fallback_statements(text))
        return facts
    assert used is not None
    for stmt in statements:
        one = _statement(stmt, used)
        one.writes = [SqlWrite(w.table, w.how, _restore_jinja(w.detail, jinja)) for w in one.writes]
        facts.statements.append(one)
    return facts


def _restore_jinja(text: str, jinja: Sequence[str]) -> str:
    """Put the Jinja expressions back where _strip_jinja left identifiers."""

    def repl(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        return "{{ " + jinja[index] + " }}" if 0 <= index < len(jinja) else match.group(0)

    return re.sub(r"idem_jinja_(\d+)", repl, text)


def _fallback_statements(text: str) -> list[_Statement]:
    """Statements sqlglot cannot read (e.g. MySQL's REPLACE INTO): classified by their first words."""
    out: list[_Statement] = []
    for chunk in text.split(";"):
        match = re.match(r"\s*(replace|insert)\s+(?:ignore\s+)?into\s+([\w.`\"]+)", chunk, re.IGNORECASE)
        if match is None:
            continue
        table = match.group(2).replace("`", "").replace('"', "").lower()
        if match.group(1).lower() == "replace":
            out.append(
                _Statement("replace", [SqlWrite(table, "replace", f"REPLACE INTO {table}")], [], [], [])
            )
        else:
            out.append(_Statement("insert", [SqlWrite(table, "append", f"INSERT INTO {table}")], [], [], []))
    return out


def _statement(stmt: exp.Expression, dialect: str) -> _Statement:
    clock, relative = _clock_fragments(stmt, dialect)
    placeholders = sorted({p.name for p in stmt.find_all(exp.Placeholder) if p.name})
    result = _Statement(type(stmt).__name__.lower(), [], clock, relative, placeholders)
    for node in stmt.find_all(exp.Where, exp.Join, exp.Having):
        result.filtering.update(f for f in find_nondeterminism(node, dialect) if f.kind == "clock")
    if isinstance(stmt, exp.Insert):
        table = _table_name(stmt.this)
        if table is None:
            return result
        conflict = stmt.args.get("conflict")
        if isinstance(conflict, exp.OnConflict):
            keys = conflict.args.get("conflict_keys") or []
            key = ", ".join(re.sub(r" NULLS (LAST|FIRST)$", "", k.sql()) for k in keys) if keys else None
            style = "ON DUPLICATE KEY UPDATE" if conflict.args.get("duplicate") else "ON CONFLICT"
            result.key = key
            detail = f"INSERT INTO {table} .. {style}" + (f" ({key})" if key else "")
            result.writes.append(SqlWrite(table, "upsert", detail))
        elif stmt.args.get("overwrite"):
            result.writes.append(SqlWrite(table, "replace", f"INSERT OVERWRITE {table}"))
        elif (stmt.args.get("alternative") or "").upper() == "REPLACE":
            result.writes.append(SqlWrite(table, "replace", f"INSERT OR REPLACE INTO {table}"))
        elif stmt.args.get("ignore") or (stmt.args.get("alternative") or "").upper() == "IGNORE":
            result.writes.append(SqlWrite(table, "keyed-insert", f"INSERT IGNORE INTO {table}"))
        else:
            result.writes.append(SqlWrite(table, "append", f"INSERT INTO {table}"))
        result.high_water = _high_water(stmt, table, dialect)
    elif isinstance(stmt, exp.Merge):
        table = _table_name(stmt.this)
        if table:
            on = stmt.args.get("on")
            result.key = on.sql(dialect=dialect) if isinstance(on, exp.Expression) else None
            result.writes.append(SqlWrite(table, "merge", f"MERGE INTO {table} ON {result.key}"))
    elif isinstance(stmt, exp.Delete):
        table = _table_name(stmt.this)
        if table:
            where = stmt.args.get("where")
            detail = f"DELETE FROM {table}" + (f" {where.sql(dialect=dialect)}" if where else "")
            result.writes.append(SqlWrite(table, "delete", detail))
    elif isinstance(stmt, exp.TruncateTable):
        for t in stmt.expressions:
            if (name := _table_name(t)) is not None:
                result.writes.append(SqlWrite(name, "truncate", f"TRUNCATE {name}"))
    elif isinstance(stmt, exp.Update):
        table = _table_name(stmt.this)
        if table:
            accumulating = _accumulating(stmt)
            if accumulating:
                result.writes.append(SqlWrite(table, "accumulate", f"UPDATE {table} SET {accumulating}"))
            else:
                result.writes.append(SqlWrite(table, "update", f"UPDATE {table}"))
    elif isinstance(stmt, exp.Create) and stmt.args.get("kind") == "TABLE":
        table = _table_name(stmt.this)
        if table and stmt.args.get("replace"):
            result.writes.append(SqlWrite(table, "replace", f"CREATE OR REPLACE TABLE {table}"))
        elif table and isinstance(stmt.args.get("expression"), exp.Query):
            result.writes.append(SqlWrite(table, "create", f"CREATE TABLE {table} AS SELECT"))
    elif isinstance(stmt, exp.Drop) and (stmt.args.get("kind") or "").upper() == "TABLE":
        for t in stmt.args.get("tables") or [stmt.this]:
            if (name := _table_name(t)) is not None:
                result.writes.append(SqlWrite(name, "drop", f"DROP TABLE {name}"))
    return result


def _clock_fragments(stmt: exp.Expression, dialect: str) -> tuple[list[LintFinding], list[LintFinding]]:
    """(plain clock/random reads, clock reads inside date arithmetic: "the last N hours")."""
    everything = find_nondeterminism(stmt, dialect)
    relative: set[LintFinding] = set()
    for node in stmt.find_all(*_ARITHMETIC):
        relative.update(f for f in find_nondeterminism(node, dialect) if f.kind == "clock")
    relative.update(f for f in everything if _RELATIVE_MODIFIER.search(f.fragment))
    return [f for f in everything if f not in relative], [f for f in everything if f in relative]


def _high_water(stmt: exp.Insert, table: str, dialect: str) -> str | None:
    """`... WHERE ts > (SELECT MAX(ts) FROM target)`: the window comes from the target's contents."""
    for select in stmt.find_all(exp.Select):
        tables = {_table_name(t) for t in select.find_all(exp.Table)}
        found = select.find(exp.Max)
        if table in tables and found is not None and select is not stmt.expression:
            return f"{found.sql(dialect=dialect)} FROM {table}"
    return None


def _accumulating(stmt: exp.Update) -> str | None:
    """`points = points + ...` when an assignment adds to (or subtracts from) the column's own value."""
    for eq in stmt.expressions:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            continue
        column = eq.this.name.lower()
        for node in eq.expression.find_all(exp.Add, exp.Sub):
            if any(isinstance(c, exp.Column) and c.name.lower() == column for c in node.iter_expressions()):
                sign = "+" if isinstance(node, exp.Add) else "-"
                return f"{eq.this.name} = {eq.this.name} {sign} ..."
    return None


def sql_writes(sql: str, dialect: str | None = None) -> list[SqlWrite]:
    """The tables a SQL text writes and how (Jinja allowed), in statement order."""
    return [w for stmt in _analyse_sql(sql, dialect).statements for w in stmt.writes]


# ---------------------------------------------------------------------------------------------
# Python code: clock reads, side effects, SQL passed to hooks and cursors
# ---------------------------------------------------------------------------------------------

_CLOCK_OWNERS = ("datetime", "date", "pendulum", "DateTime", "timezone", "Date")
_CLOCK_METHODS = frozenset({"now", "utcnow", "today", "yesterday", "tomorrow", "utcfromtimestamp"})
_RANDOM_CALLS = frozenset(
    {
        "random.random",
        "random.randint",
        "random.choice",
        "random.uniform",
        "random.shuffle",
        "random.sample",
        "random.randrange",
        "uuid.uuid1",
        "uuid.uuid4",
        "uuid4",
        "uuid1",
        "secrets.token_hex",
        "secrets.token_urlsafe",
        "os.urandom",
    }
)
_RELATIVE_CALLS = frozenset({"timedelta", "duration", "relativedelta", "Duration"})
_SHIFT_METHODS = frozenset({"subtract", "add", "shift", "minus", "plus"})

_SIDE_EFFECT_OPERATORS: tuple[tuple[str, str], ...] = (
    ("Email", "an email"),
    ("Smtp", "an email"),
    ("Slack", "a Slack message"),
    ("Http", "an HTTP request"),
    ("Webhook", "a webhook call"),
    ("Sns", "an SNS message"),
    ("Sqs", "an SQS message"),
    ("Telegram", "a Telegram message"),
    ("Discord", "a Discord message"),
    ("Teams", "a Teams message"),
    ("Pagerduty", "a PagerDuty event"),
    ("Opsgenie", "an Opsgenie alert"),
    ("Twilio", "an SMS"),
    ("PubSubPublish", "a Pub/Sub message"),
)
_SIDE_EFFECT_CALLS: dict[str, str] = {
    "post": "an HTTP POST",
    "put": "an HTTP PUT",
    "patch": "an HTTP PATCH",
    "send_email": "an email",
    "sendmail": "an email",
    "send_mail": "an email",
    "send_message": "a message",
    "publish": "a published message",
    "send_sms": "an SMS",
    "create_payment": "a payment",
    "create_transfer": "a transfer",
    "charge": "a charge",
}
_SQL_METHODS = frozenset(
    {"execute", "run", "exec_driver_sql", "get_records", "get_first", "get_pandas_df", "read_sql", "text"}
)


def _clock_call(call: ast.Call, scope: Scope | None) -> str | None:
    """`datetime.now` etc. when the call reads the clock or randomness, else None."""
    written = _dotted(call.func)
    name = scope.resolve_name(written) if scope is not None else written
    if name != written and _clock_call_name(name) is not None:
        return f"{written}()"
    return _clock_call_name(written)


def _clock_call_name(name: str) -> str | None:
    last = _last(name)
    owner = name.rsplit(".", 2)[-2] if "." in name else ""
    if last in _CLOCK_METHODS and (owner in _CLOCK_OWNERS or owner.endswith("datetime")):
        return f"{name}()"
    if name in ("timezone.utcnow", "utcnow", "days_ago", "dates.days_ago"):
        return f"{name}()"
    if name in _RANDOM_CALLS:
        return f"{name}()"
    return None


def _is_relative(call: ast.Call, parents: dict[ast.AST, ast.AST]) -> bool:
    """The clock read is shifted by a span: now() - timedelta(hours=24), now().subtract(days=1)..."""
    if _last(_dotted(call.func)) == "days_ago":
        return True
    node: ast.AST = call
    for _ in range(4):
        parent = parents.get(node)
        if parent is None:
            return False
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add | ast.Sub):
            other = parent.right if parent.left is node else parent.left
            if isinstance(other, ast.Call) and _last(_dotted(other.func)) in _RELATIVE_CALLS:
                return True
            if isinstance(other, ast.Name | ast.Attribute | ast.Constant):
                return True
        if isinstance(parent, ast.Attribute) and parent.attr in _SHIFT_METHODS:
            return True
        node = parent
    return False


def _parents(root: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(root) for child in ast.iter_child_nodes(parent)}


def _keyed(call: ast.Call) -> bool:
    """The call carries an idempotency / deduplication key (a keyword, header or dict key)."""
    for node in ast.walk(call):
        if isinstance(node, ast.keyword) and node.arg and _KEY_WORDS.search(node.arg):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _KEY_WORDS.search(node.value):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Per-task facts
# ---------------------------------------------------------------------------------------------


@dataclass
class _Write:
    table: str
    how: str
    detail: str
    file: str
    line: int
    conn_id: str | None


@dataclass
class _WindowRef:
    kind: str  # run, param, clock, relative, target
    text: str


@dataclass
class _Effect:
    what: str
    keyed: bool
    file: str
    line: int


@dataclass
class _Facts:
    #: reads of the clock or randomness that change the values written (not which rows)
    unstable: list[str] = field(default_factory=list)
    #: what the linter cannot see into: "its bash command", "its Python code", "operator X"
    opaque: str | None = None
    #: "<table> is also written by <task>" for targets shared with other tasks
    shared: list[str] = field(default_factory=list)
    writes: list[_Write] = field(default_factory=list)
    windows: list[_WindowRef] = field(default_factory=list)
    effects: list[_Effect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    saw_sql: bool = False
    saw_code: bool = False
    project: str | None = None  # "overwrite" | "merge"
    retries: int | None = None


# ---------------------------------------------------------------------------------------------
# The linter
# ---------------------------------------------------------------------------------------------


class _Linter:
    def __init__(self, dialect: str | None = None) -> None:
        self.dialect = dialect
        self.findings: list[Finding] = []
        self.tasks: list[tuple[TaskDef, _Facts]] = []
        self.dags: list[DagDef] = []
        self.sources: dict[Path, Source] = {}
        self.scopes: dict[Path, Scope | None] = {}
        self.files: list[str] = []
        self.notes: dict[int, list[str]] = {}

    # -- files ---------------------------------------------------------------------------------
    def source(self, path: Path) -> Source | None:
        path = path.resolve()
        if path not in self.sources:
            try:
                self.sources[path] = Source(path, path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                return None
        return self.sources[path]

    def scope(self, path: Path) -> Scope | None:
        path = path.resolve()
        if path not in self.scopes:
            self.scopes[path] = None
            src = self.source(path)
            if src is not None:
                with contextlib.suppress(SyntaxError, ValueError):
                    self.scopes[path] = Scope(self, src, ast.parse(src.text, filename=str(path)))
        return self.scopes[path]

    def module_scope(self, module: str, level: int, importer: Path) -> Scope | None:
        """The scope of an imported module, found on disk (never imported)."""
        path = _module_path(module, level, importer)
        return self.scope(path) if path is not None else None

    def add(self, rule: str, file: str, line: int, message: str, **kwargs: Any) -> None:
        fix = kwargs.pop("fix", None) or RULES[rule].fix
        self.findings.append(Finding(rule, file, line, message, fix, **kwargs))

    # -- one DAG file --------------------------------------------------------------------------
    def lint_file(self, path: Path) -> None:
        src = self.source(path)
        if src is None:
            return
        self.files.append(src.display)
        try:
            tree = ast.parse(src.text, filename=str(path))
        except SyntaxError as err:
            self.add("IDEM000", src.display, err.lineno or 1, f"not valid Python: {err.msg}")
            return
        scope = Scope(self, src, tree)
        self.scopes[src.path] = scope
        collector = _Collector(scope)
        collector.collect()
        self.dags.extend(collector.dags)
        for dag in collector.dags:
            self._check_dag(dag)
            for task in dag.tasks:
                self.tasks.append((task, self._check_task(task)))
        for task in collector.loose:
            self.tasks.append((task, self._check_task(task)))
        self._module_clock(scope, collector)

    # -- DAG level -----------------------------------------------------------------------------
    def _check_dag(self, dag: DagDef) -> None:
        catchup = dag.scope.literal(dag.kwargs.get("catchup"))
        if catchup is not True:
            return
        end = dag.kwargs.get("end_date") or dag.default_args.get("end_date")
        if end is not None and not (isinstance(end, ast.Constant) and end.value is None):
            return
        schedule_node = dag.kwargs.get("schedule", dag.kwargs.get("schedule_interval"))
        period, shown = _schedule_period(dag.scope, schedule_node)
        if shown is None:
            return  # no time-based schedule: catchup has no windows to create
        start_node = dag.kwargs.get("start_date") or dag.default_args.get("start_date")
        start = _static_date(dag.scope, start_node)
        line = dag.kwargs["catchup"].lineno
        if start is not None:
            since = f"since {start.isoformat()}"
            count = ""
            if period is not None:
                today = datetime.now(timezone.utc).date()  # the linter's own clock, for the count only
                windows = max(0, int((today - start) / period))
                count = f" ({windows:,} so far, growing by one every period)"
            what = f"every {shown} window {since}{count}"
        elif start_node is not None:
            what = (
                f"every {shown} window since a start_date the linter cannot read ({ast.unparse(start_node)})"
            )
        else:
            what = f"every {shown} window since its start_date"
        self.add(
            "IDEM005",
            dag.file,
            line,
            f"catchup=True and no end_date: when the DAG is unpaused the scheduler creates {what}, all "
            "queued at once, and the number grows without bound",
            dag_id=dag.dag_id,
            anchors=((dag.file, dag.line),),
        )

    # -- task level ----------------------------------------------------------------------------
    def _check_task(self, task: TaskDef) -> _Facts:
        facts = _Facts()
        scope = task.scope
        file = scope.source.display
        retries = task.kwargs.get("retries")
        if retries is None and task.dag is not None:
            retries = task.dag.default_args.get("retries")
        value = scope.literal(retries) if retries is not None else 0
        facts.retries = value if isinstance(value, int) and not isinstance(value, bool) else None
        conn_id = scope.literal(task.kwargs.get("conn_id") or task.kwargs.get("postgres_conn_id"))
        conn = conn_id if isinstance(conn_id, str) else None
        dialect = self.dialect or _dialect_hint(task.operator, conn)
        anchors = ((file, task.line),)

        if task.operator in _PROJECT_OPERATORS:
            self._project_operator(task, facts, conn or "warehouse", dialect, anchors)
        else:
            for located in self._task_sql(task):
                self._sql(task, facts, located, dialect, conn, anchors, project=False)
            bash = scope.string(task.kwargs.get("bash_command"))
            if bash is not None:
                self._bash(task, facts, bash, anchors)
            self._operator_effect(task, facts)
        for name, value in task.kwargs.items():
            if name not in _NOT_TEMPLATES:
                self._jinja_values(task, facts, value, anchors, f"its {name}")
        if (
            not facts.saw_sql
            and not task.functions
            and "bash_command" not in task.kwargs
            and not facts.effects
            and not facts.writes
            and not task.operator.endswith("Sensor")
            and task.operator not in ("EmptyOperator", "EmptySkipOperator")
        ):
            facts.opaque = f"the {task.operator}"
        self._code(task, facts, anchors, dialect, conn)
        self._call_args_clock(task, facts, anchors)
        self._task_findings(task, facts, anchors)
        return facts

    def _project_operator(
        self,
        task: TaskDef,
        facts: _Facts,
        conn: str,
        dialect: str | None,
        anchors: tuple[tuple[str, int], ...],
    ) -> None:
        scope = task.scope
        file = scope.source.display
        table = scope.literal(task.kwargs.get("table"))
        shown = table if isinstance(table, str) else "<table>"
        if task.operator in _MERGE_OPERATORS:
            keys = scope.literal(task.kwargs.get("key_columns"))
            keys_text = ", ".join(keys) if isinstance(keys, list) else keys if isinstance(keys, str) else "?"
            missing = scope.literal(task.kwargs.get("delete_missing")) is True
            detail = f"merges on ({keys_text}) into {shown}" + (
                ", deleting the window's vanished keys" if missing else ""
            )
            facts.project = "merge"
            facts.writes.append(_Write(shown.lower(), "merge", detail, file, task.line, conn))
        else:
            column = scope.literal(task.kwargs.get("partition_column"))
            detail = f"deletes and rewrites its window of {shown}" + (
                f" (partition_column={column})" if isinstance(column, str) else ""
            )
            facts.project = "overwrite"
            facts.writes.append(_Write(shown.lower(), "overwrite", detail, file, task.line, conn))
        granularity = task.kwargs.get("granularity")
        anchor = scope.literal(task.kwargs.get("anchor"))
        if granularity is not None:
            literal = scope.literal(granularity)
            gran = literal if isinstance(literal, str) else ast.unparse(granularity)
            period = "the period ending at it" if anchor == "end" else f"granularity={gran}"
            facts.windows.append(
                _WindowRef("run", f"The run's logical date plus {period} ({task.operator}).")
            )
        else:
            facts.windows.append(
                _WindowRef(
                    "run",
                    f"The run's data interval ({task.operator}; it declares no granularity, so the "
                    "timetable must give intervals with width).",
                )
            )
        allowed_raw = scope.literal(task.kwargs.get("allow_functions"))
        allowed = (
            {a.lower() for a in allowed_raw if isinstance(a, str)} if isinstance(allowed_raw, list) else set()
        )
        for name in ("sql", "source_snapshot_sql"):
            for located in self._sql_values(task, task.kwargs.get(name)):
                self._sql(task, facts, located, dialect, conn, anchors, project=True, allowed=allowed)

    def _task_sql(self, task: TaskDef) -> list[Located]:
        node = task.kwargs.get("sql")
        if node is None and task.operator.endswith("Operator"):
            node = task.kwargs.get("query")
        return self._sql_values(task, node)

    def _sql_values(self, task: TaskDef, node: ast.expr | None) -> list[Located]:
        if node is None:
            return []
        found = task.scope.strings(node)
        if not found:
            task_note = f"its SQL ({ast.unparse(node)[:60]}) is not a literal the linter can read"
            self._note(task, task_note)
            return []
        out: list[Located] = []
        for located in found:
            stripped = located.text.strip()
            if _SQL_FILE.fullmatch(stripped):
                sql_file = self._find_sql_file(task, stripped)
                if sql_file is None:
                    self._note(
                        task, f"SQL file {stripped} not found next to the DAG or on its template_searchpath"
                    )
                    continue
                src = self.source(sql_file)
                if src is not None:
                    out.append(Located(src.text, [(src, 1, max(1, len(src.lines)))]))
            else:
                out.append(located)
        return out

    def _note(self, task: TaskDef, note: str) -> None:
        self.notes.setdefault(id(task), []).append(note)

    def _find_sql_file(self, task: TaskDef, name: str) -> Path | None:
        base = task.scope.source.path.parent
        roots = [base]
        if task.dag is not None:
            paths = task.dag.scope.literal(task.dag.kwargs.get("template_searchpath"))
            for entry in paths if isinstance(paths, list) else [paths] if isinstance(paths, str) else []:
                if isinstance(entry, str):
                    roots.append(base / entry)
        for root in roots:
            candidate = (root / name).resolve()
            if candidate.is_file():
                return candidate
        return None

    def _sql(
        self,
        task: TaskDef,
        facts: _Facts,
        located: Located,
        dialect: str | None,
        conn: str | None,
        anchors: tuple[tuple[str, int], ...],
        project: bool,
        allowed: set[str] | None = None,
    ) -> None:
        analysis = _analyse_sql(located.text, dialect)
        facts.saw_sql = True
        if analysis.error is not None:
            where = "{}:{}".format(*located.place(None))
            self._note(task, f"SQL at {where} could not be parsed: {analysis.error[:160]}")
        self._jinja(task, facts, analysis.jinja, located, anchors)
        cursor = 0
        for stmt in analysis.statements:
            keyword = _STATEMENT_KEYWORDS.get(stmt.kind)
            found = located.find(keyword, start=cursor) if keyword else None
            start = found if found is not None else cursor
            cursor = start + 1 if found is not None else cursor
            for hit, relative in [(h, False) for h in stmt.clock] + [(h, True) for h in stmt.relative]:
                shown = _shown(hit)
                file, line = located.locate(_function_pattern(hit), start=start)
                acked = allowed is not None and hit.function in allowed
                if relative:
                    rule = "IDEM004"
                    message = (
                        f"the window is taken relative to the clock ({shown} shifted by a fixed span): a "
                        "rerun a day late reads a different span, and the missed one is never loaded"
                    )
                    facts.windows.append(
                        _WindowRef("relative", f'The clock: "the last N" before {shown} in its SQL.')
                    )
                else:
                    rule = "IDEM001"
                    message = (
                        f"the SQL reads {_KIND_TEXT.get(hit.kind, 'the clock')}: {shown}, so a rerun of a "
                        "window gives different rows than its first run"
                    )
                    if hit in stmt.filtering:
                        facts.windows.append(_WindowRef("clock", f"The clock: {shown} in its SQL."))
                    else:
                        facts.unstable.append(f"{shown} ({_KIND_TEXT.get(hit.kind, hit.kind)})")
                self.add(
                    rule,
                    file,
                    line,
                    message,
                    dag_id=task.dag_id,
                    task_id=task.task_id,
                    anchors=anchors,
                    acknowledged=acked,
                    reason="listed in allow_functions on the operator" if acked else None,
                )
            if stmt.high_water and not project:
                for write in stmt.writes:
                    if write.how == "append":
                        file, line = _write_place(located, write, start)
                        self.add(
                            "IDEM004",
                            file,
                            line,
                            f"the window is taken from the target's current contents ({stmt.high_water}): a "
                            "rerun or backfill of an earlier window loads nothing, and rows that arrive late "
                            "behind the mark are never loaded",
                            dag_id=task.dag_id,
                            task_id=task.task_id,
                            anchors=anchors,
                        )
                        facts.writes.append(
                            _Write(
                                write.table,
                                "high-water",
                                f"{write.detail} of the rows past {stmt.high_water}",
                                file,
                                line,
                                conn,
                            )
                        )
                stmt.writes = [w for w in stmt.writes if w.how != "append"]
            if stmt.high_water:
                facts.windows.append(
                    _WindowRef(
                        "target", f"The target's current contents: {stmt.high_water} (a high-water mark)."
                    )
                )
            names = set(stmt.placeholders)
            if names and not project:  # the project operators bind :window_start / :window_end
                bound = ", ".join(f":{n}" for n in sorted(names))
                facts.windows.append(_WindowRef("param", f"Bound parameters {bound} in its SQL."))
            if not project:
                for write in stmt.writes:
                    file, line = _write_place(located, write, start)
                    facts.writes.append(_Write(write.table, write.how, write.detail, file, line, conn))

    def _jinja(
        self,
        task: TaskDef,
        facts: _Facts,
        expressions: Sequence[str],
        located: Located,
        anchors: tuple[tuple[str, int], ...],
        where: str = "its SQL",
    ) -> None:
        for text in expressions:
            try:
                tree = ast.parse(text.split("|")[0].strip() or "None", mode="eval")
            except SyntaxError:
                continue
            clock = False
            parents = _parents(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and (name := _clock_call(node, None)) is not None:
                    clock = True
                    file, line = located.locate(re.escape(_last(name.rstrip("()"))) + r"\s*\(")
                    if _is_relative(node, parents):
                        where_read = f"a template in {where}"
                        self._clock_read(task, facts, name, (file, line), anchors, where_read, True)
                    else:
                        self.add(
                            "IDEM001" if where == "its SQL" else "IDEM003",
                            file,
                            line,
                            f"the template {{{{ {text} }}}} in {where} reads the clock ({name}), so a rerun "
                            "of a window renders something different than its first run",
                            dag_id=task.dag_id,
                            task_id=task.task_id,
                            anchors=anchors,
                        )
                        facts.windows.append(_WindowRef("clock", f"The clock: {{{{ {text} }}}} in {where}."))
            if clock:
                continue
            names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
            run = sorted((names | attrs) & _RUN_NAMES)
            if run:
                what = "data interval" if any(n.startswith("data_interval") for n in run) else "logical date"
                facts.windows.append(_WindowRef("run", f"The run's {what}: {{{{ {text} }}}} in {where}."))

    def _jinja_values(
        self,
        task: TaskDef,
        facts: _Facts,
        node: ast.expr | None,
        anchors: tuple[tuple[str, int], ...],
        where: str,
    ) -> None:
        """Templates in a templated argument (a string, or the strings of a dict or list)."""
        if node is None:
            return
        value, scope = task.scope.value(node)
        items: list[ast.expr | None]
        if isinstance(value, ast.Dict):
            items = list(value.values)
        elif isinstance(value, ast.List | ast.Tuple):
            items = list(value.elts)
        else:
            items = [value]
        for item in items:
            located = scope.string(item) if item is not None else None
            if located is not None:
                self._jinja(task, facts, _strip_jinja(located.text)[1], located, anchors, where)

    def _bash(
        self, task: TaskDef, facts: _Facts, bash: Located, anchors: tuple[tuple[str, int], ...]
    ) -> None:
        facts.opaque = facts.opaque or "its bash command"
        self._jinja(task, facts, _strip_jinja(bash.text)[1], bash, anchors, "its bash command")
        for match in re.finditer(r"\$\(\s*date\b([^)]*)\)|`\s*date\b([^`]*)`", bash.text):
            args = match.group(1) or match.group(2) or ""
            if "{{" in args:
                continue
            file, line = bash.locate(re.escape(match.group(0)), r"\bdate\b")
            relative = re.search(r"(-d|--date)\b.*(ago|yesterday|tomorrow|hour|day|week|month)", args)
            shown = f"$(date{args})"
            if relative:
                self._clock_read(task, facts, shown, (file, line), anchors, "its bash command", True)
            else:
                self._clock_read(task, facts, shown, (file, line), anchors, "its bash command", False)

    def _operator_effect(self, task: TaskDef, facts: _Facts) -> None:
        for marker, what in _SIDE_EFFECT_OPERATORS:
            if marker.lower() in task.operator.lower():
                if marker == "Http":
                    method = task.scope.literal(task.kwargs.get("method"))
                    if isinstance(method, str) and method.upper() in ("GET", "HEAD", "OPTIONS"):
                        return
                keyed = any(_KEY_WORDS.search(name) for name in task.kwargs) or any(
                    _keyed_expr(v) for v in task.kwargs.values()
                )
                facts.effects.append(
                    _Effect(f"{what} ({task.operator})", keyed, task.scope.source.display, task.line)
                )
                return

    # -- Python code of the task --------------------------------------------------------------
    def _code(
        self,
        task: TaskDef,
        facts: _Facts,
        anchors: tuple[tuple[str, int], ...],
        dialect: str | None,
        conn: str | None,
    ) -> None:
        if not task.functions:
            return
        facts.saw_code = True
        scope = task.scope
        file = scope.source.display
        seen: set[int] = set()
        queue: list[ast.AST] = list(task.functions)
        decorator = task.decorator or ""
        while queue:
            fn = queue.pop(0)
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                args = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]}
                run = sorted(args & _RUN_NAMES)
                if run:
                    facts.windows.append(
                        _WindowRef("run", f"The run's context: {', '.join(run)} in its code.")
                    )
            locals_: dict[str, ast.expr] = {}
            parents = _parents(fn)
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                ):
                    locals_[node.targets[0].id] = node.value
                if isinstance(node, ast.Name) and node.id == "get_current_context":
                    facts.windows.append(
                        _WindowRef("run", "The run's context: get_current_context() in its code.")
                    )
                if (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.slice, ast.Constant)
                    and node.slice.value in _RUN_NAMES
                ):
                    key = node.slice.value
                    facts.windows.append(_WindowRef("run", f"The run's context: [{key!r}] in its code."))
                if not isinstance(node, ast.Call):
                    continue
                name = _dotted(node.func)
                if isinstance(node.func, ast.Name) and node.func.id in scope.functions:
                    queue.append(scope.functions[node.func.id])
                clock = _clock_call(node, scope)
                if clock is not None:
                    relative = _is_relative(node, parents)
                    self._clock_read(task, facts, clock, (file, node.lineno), anchors, "its code", relative)
                    continue
                method = _last(name)
                if method in _SQL_METHODS and (node.args or any(k.arg == "sql" for k in node.keywords)):
                    arg = (
                        node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "sql")
                    )
                    if isinstance(arg, ast.Name) and arg.id in locals_:
                        arg = locals_[arg.id]
                    for located in scope.strings(arg):
                        if _looks_like_sql(located.text):
                            self._sql(task, facts, located, dialect, conn, anchors, project=False)
                    continue
                if method in ("insert_rows", "to_sql"):
                    self._python_write(task, facts, node, method, file, conn)
                    continue
                if method in _SIDE_EFFECT_CALLS and isinstance(node.func, ast.Attribute | ast.Name):
                    if method in ("post", "put", "patch") and not isinstance(node.func, ast.Attribute):
                        continue
                    facts.effects.append(
                        _Effect(
                            f"{_SIDE_EFFECT_CALLS[method]} ({name}(...))", _keyed(node), file, node.lineno
                        )
                    )
            if decorator in ("task.sql", "task.bash") and isinstance(
                fn, ast.FunctionDef | ast.AsyncFunctionDef
            ):
                for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None):
                    returned = scope.string(ret.value)
                    if returned is None:
                        continue
                    if decorator == "task.sql":
                        self._sql(task, facts, returned, dialect, conn, anchors, project=False)
                    else:
                        self._bash(task, facts, returned, anchors)
        if not facts.writes and not facts.effects and facts.opaque is None:
            facts.opaque = "its Python code"

    def _python_write(
        self, task: TaskDef, facts: _Facts, node: ast.Call, method: str, file: str, conn: str | None
    ) -> None:
        """hook.insert_rows(table, rows[, replace=True]) and DataFrame.to_sql(name, con, if_exists=...)."""
        kwargs = _kwargs(node)
        name_arg = "table" if method == "insert_rows" else "name"
        table = task.scope.literal(node.args[0] if node.args else kwargs.get(name_arg))
        shown = table if isinstance(table, str) else "<table>"
        if method == "insert_rows":
            replace = task.scope.literal(kwargs.get("replace")) is True
            how, detail = ("upsert", f"insert_rows({shown}, replace=True)") if replace else ("append", "")
            detail = detail or f"insert_rows({shown})"
        else:
            mode = task.scope.literal(kwargs.get("if_exists"))
            how = {"append": "append", "replace": "replace"}.get(
                mode if isinstance(mode, str) else "", "create"
            )
            detail = f"to_sql({shown}, if_exists={mode!r})" if how != "create" else f"to_sql({shown})"
        facts.writes.append(_Write(shown.lower(), how, detail, file, node.lineno, conn))

    def _clock_read(
        self,
        owner: TaskDef | DagDef | None,
        facts: _Facts | None,
        name: str,
        place: tuple[str, int],
        anchors: tuple[tuple[str, int], ...],
        where: str,
        relative: bool,
    ) -> None:
        """A clock (or randomness) read in Python, a template or a shell: IDEM004 when shifted by a
        span ("the last N hours"), else IDEM003."""
        task = owner if isinstance(owner, TaskDef) else None
        file, line = place
        if relative:
            rule = "IDEM004"
            message = (
                f'the window is "the last N" before now: {name} shifted by a fixed span in {where}; a rerun '
                "a day late reads a different span, and the missed one is never loaded"
            )
            ref = _WindowRef("relative", f'The clock: "the last N" before {name} in {where}.')
        else:
            rule = "IDEM003"
            randomness = name.split(".")[0].rstrip("()") in ("random", "uuid", "secrets", "os")
            kind = "randomness" if randomness or name.startswith("uuid") else "the clock"
            message = (
                f"{name} in {where} reads {kind}: a rerun of the same run gets a different value than the "
                "first run did"
            )
            ref = _WindowRef("clock", f"The clock: {name} in {where} (line {line}).")
        self.add(
            rule,
            file,
            line,
            message,
            dag_id=owner.dag_id if owner is not None else None,
            task_id=task.task_id if task is not None else None,
            anchors=anchors,
        )
        if facts is not None:
            facts.windows.append(ref)

    def _call_args_clock(self, task: TaskDef, facts: _Facts, anchors: tuple[tuple[str, int], ...]) -> None:
        """Clock reads inside the task's own arguments (evaluated when the DAG file is parsed)."""
        file = task.scope.source.display
        for value in task.kwargs.values():
            if isinstance(value, ast.Lambda):
                continue
            parents = _parents(value)
            for node in _walk_no_defs(value):
                if isinstance(node, ast.Call) and (name := _clock_call(node, task.scope)) is not None:
                    relative = _is_relative(node, parents)
                    self._clock_read(
                        task, facts, name, (file, node.lineno), anchors, "its arguments", relative
                    )

    def _module_clock(self, scope: Scope, collector: _Collector) -> None:
        """Clock reads at module level or in DAG arguments, outside any task's arguments."""
        task_spans = [
            (t.line, t.end_line) for t in [*collector.loose, *(t for d in collector.dags for t in d.tasks)]
        ]
        file = scope.source.display
        parents = _parents(scope.tree)
        for stmt in scope.tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            for node in _walk_no_defs(stmt):
                if not isinstance(node, ast.Call) or (name := _clock_call(node, scope)) is None:
                    continue
                if any(first <= node.lineno <= last for first, last in task_spans):
                    continue
                dag = next((d for d in collector.dags if d.line <= node.lineno <= d.end_line), None)
                where = "the DAG's arguments" if dag is not None else "module-level code"
                anchors = ((file, dag.line),) if dag is not None else ()
                relative = _is_relative(node, parents)
                self._clock_read(dag, None, name, (file, node.lineno), anchors, where, relative)

    # -- findings from a task's facts ----------------------------------------------------------
    def _task_findings(self, task: TaskDef, facts: _Facts, anchors: tuple[tuple[str, int], ...]) -> None:
        retries = facts.retries or 0
        retry_text = f", and retries={retries} repeat it automatically after any failure" if retries else ""
        cleared = {w.table for w in facts.writes if w.how in ("delete", "truncate", "replace", "drop")}
        for write in facts.writes:
            if write.how == "delete" or write.how == "truncate" or write.how == "drop":
                continue
            if write.how == "append" and write.table not in cleared:
                self.add(
                    "IDEM002",
                    write.file,
                    write.line,
                    f"{write.detail} appends: no DELETE of its window and no key (ON CONFLICT / MERGE) in "
                    f"this task, so every rerun adds the window's rows again{retry_text}",
                    dag_id=task.dag_id,
                    task_id=task.task_id,
                    anchors=anchors,
                )
            elif write.how == "append" and write.table in cleared:
                write.how = "overwrite"
                write.detail = f"deletes its window of {write.table}, then inserts it, in one task"
            elif write.how == "accumulate":
                self.add(
                    "IDEM008",
                    write.file,
                    write.line,
                    f"{write.detail} adds to the value already there: every rerun adds again (a running "
                    f"total){retry_text}",
                    dag_id=task.dag_id,
                    task_id=task.task_id,
                    anchors=anchors,
                )
        if retries:
            for effect in facts.effects:
                if effect.keyed:
                    continue
                self.add(
                    "IDEM006",
                    effect.file,
                    effect.line,
                    f"the task sends {effect.what} with no idempotency key and has retries={retries}: a "
                    "failure after the send (or a crash before the task is marked done) sends it again",
                    dag_id=task.dag_id,
                    task_id=task.task_id,
                    anchors=anchors,
                )

    # -- after every file ----------------------------------------------------------------------
    def cross_task(self) -> None:
        writers: dict[str, list[tuple[TaskDef, _Write]]] = {}
        facts_of = {id(task): facts for task, facts in self.tasks}
        for task, facts in self.tasks:
            seen: set[str] = set()
            for write in facts.writes:
                if write.how in ("create", "drop") or write.table in seen or write.table.startswith("<"):
                    continue
                seen.add(write.table)
                writers.setdefault(write.table, []).append((task, write))
        for table, entries in writers.items():
            for task, write in entries:
                others = [
                    (t, w)
                    for t, w in entries
                    if t is not task
                    and (w.conn_id is None or write.conn_id is None or w.conn_id == write.conn_id)
                ]
                if not others:
                    continue
                names = ", ".join(f"{_label(t)} ({t.scope.source.display}:{t.line})" for t, _ in others)
                facts_of[id(task)].shared.append(
                    f"{table} is also written by {', '.join(_label(t) for t, _ in others)}"
                )
                self.add(
                    "IDEM007",
                    task.scope.source.display,
                    task.line,
                    f"{table} is also written by {names}: each task's rerun overwrites, duplicates or "
                    "deletes the other's rows, and no window write is the whole truth of the table",
                    dag_id=task.dag_id,
                    task_id=task.task_id,
                    anchors=((write.file, write.line),),
                )

    def task_reports(self) -> list[TaskReport]:
        rules_by_task: dict[tuple[str | None, str], list[str]] = {}
        for f in self.findings:
            if f.task_id is not None:
                rules_by_task.setdefault((f.dag_id, f.task_id), []).append(f.rule)
        reports = []
        for task, facts in self.tasks:
            key = (task.dag_id, task.task_id)
            notes = self.notes.get(id(task), []) + facts.notes
            reports.append(
                TaskReport(
                    dag_id=task.dag_id,
                    task_id=task.task_id,
                    file=task.scope.source.display,
                    line=task.line,
                    operator=task.operator,
                    targets=sorted({w.table for w in facts.writes}),
                    runs_twice=_runs_twice(facts),
                    window=_window_answer(facts),
                    backfill=_backfill_answer(task, facts),
                    rules=sorted(set(rules_by_task.get(key, []))),
                    notes=notes,
                )
            )
        return reports


def _label(task: TaskDef) -> str:
    return f"{task.dag_id}.{task.task_id}" if task.dag_id else task.task_id


def _keyed_expr(node: ast.expr) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and _KEY_WORDS.search(sub.value):
            return True
        if isinstance(sub, ast.keyword) and sub.arg and _KEY_WORDS.search(sub.arg):
            return True
    return False


_KIND_TEXT = {"clock": "the clock", "random": "randomness", "sequence": "a sequence"}
_STATEMENT_KEYWORDS = {
    "insert": r"\binsert\b|\breplace\b",
    "delete": r"\bdelete\b",
    "update": r"\bupdate\b",
    "merge": r"\bmerge\b",
    "select": r"\bselect\b|\bwith\b",
    "truncatetable": r"\btruncate\b",
    "create": r"\bcreate\b",
    "drop": r"\bdrop\b",
}


def _shown(hit: LintFinding) -> str:
    """The read as the user wrote it: now() stays now(), though sqlglot regenerates CURRENT_TIMESTAMP."""
    if hit.fragment.upper().startswith(hit.function.upper()):
        return hit.fragment
    if re.fullmatch(r"[a-z_][a-z0-9_]*", hit.function):
        return f"{hit.function}()"
    return hit.function


def _function_pattern(hit: LintFinding) -> str:
    """A regex finding the read in the source text."""
    special = re.search(r"'(now|today|yesterday|tomorrow)'", hit.function)
    if special:
        return re.escape(special.group(0))
    return r"\b" + r"\s+".join(re.escape(word) for word in hit.function.split()) + r"\b"


def _write_place(located: Located, write: SqlWrite, start: int) -> tuple[str, int]:
    table = re.escape(write.table.split(".")[-1])
    patterns = {
        "append": [rf"\binsert\b[^;]*?\binto\s+\S*?{table}\b", r"\binsert\b"],
        "keyed-insert": [r"\binsert\b"],
        "upsert": [rf"\binsert\b[^;]*?\binto\s+\S*?{table}\b", r"\binsert\b"],
        "replace": [r"\breplace\b", r"\binsert\b", r"\bcreate\b"],
        "merge": [r"\bmerge\b"],
        "delete": [rf"\bdelete\s+from\s+\S*?{table}\b", r"\bdelete\b"],
        "truncate": [r"\btruncate\b"],
        "update": [rf"\bupdate\s+\S*?{table}\b"],
        "accumulate": [rf"\bupdate\s+\S*?{table}\b", r"\bupdate\b"],
    }.get(write.how, [table])
    return located.locate(*patterns, start=start)


def _looks_like_sql(text: str) -> bool:
    return bool(
        re.match(r"\s*(select|insert|update|delete|merge|with|truncate|replace|create|drop)\b", text, re.I)
    )


def _dialect_hint(operator: str, conn_id: str | None) -> str | None:
    text = f"{operator} {conn_id or ''}".lower()
    for marker, dialect in (
        ("postgres", "postgres"),
        ("mysql", "mysql"),
        ("maria", "mysql"),
        ("sqlite", "sqlite"),
        ("duckdb", "duckdb"),
    ):
        if marker in text:
            return dialect
    return None


def _module_path(module: str, level: int, importer: Path) -> Path | None:
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


def _schedule_period(scope: Scope, node: ast.expr | None) -> tuple[timedelta | None, str | None]:
    """(period, as shown) of a time-based schedule; (None, None) when it creates no time windows."""
    if node is None:
        return None, None
    value, inner = scope.value(node)
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return None, None
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        text = value.value.strip()
        if text in _PRESETS:
            period = _PRESETS[text]
            return (period, text) if period is not None else (None, None)
        return _cron_period(text), text
    if isinstance(value, ast.Call):
        name = _last(_dotted(value.func))
        if name in _RELATIVE_CALLS:
            kwargs = {k: inner.literal(v) for k, v in _kwargs(value).items()}
            try:
                return timedelta(
                    **{k: v for k, v in kwargs.items() if isinstance(v, int | float)}
                ), ast.unparse(value)
            except TypeError:
                return None, ast.unparse(value)
        if "Timetable" in name:
            return None, name
    return None, None  # assets, lists of assets: event-driven, no windows to catch up


def _cron_period(expr: str) -> timedelta | None:
    fields = expr.split()
    if len(fields) != 5:
        return None
    minute, hour, dom, month, dow = fields
    if (dom, month, dow) == ("*", "*", "*"):
        if minute.startswith("*/") and hour == "*" and minute[2:].isdigit():
            return timedelta(minutes=int(minute[2:]))
        if minute.isdigit() and hour == "*":
            return timedelta(hours=1)
        if minute.isdigit() and hour.startswith("*/") and hour[2:].isdigit():
            return timedelta(hours=int(hour[2:]))
        if minute.isdigit() and hour.isdigit():
            return timedelta(days=1)
    if minute.isdigit() and hour.isdigit() and dom == "*" and month == "*" and dow.isdigit():
        return timedelta(days=7)
    if minute.isdigit() and hour.isdigit() and dom.isdigit() and month == "*" and dow == "*":
        return timedelta(days=30.44)
    return None


def _static_date(scope: Scope, node: ast.expr | None) -> date | None:
    value, inner = scope.value(node)
    if isinstance(value, ast.Call):
        name = _dotted(value.func)
        args = [inner.literal(a) for a in value.args]
        if (
            _last(name) in ("datetime", "DateTime", "date")
            and len(args) >= 3
            and all(isinstance(a, int) for a in args[:3])
        ):
            with contextlib.suppress(ValueError):
                return date(args[0], args[1], args[2])
        if _last(name) in ("parse", "fromisoformat") and args and isinstance(args[0], str):
            with contextlib.suppress(ValueError):
                return date.fromisoformat(args[0][:10])
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        with contextlib.suppress(ValueError):
            return date.fromisoformat(value.value[:10])
    return None


# ---------------------------------------------------------------------------------------------
# The three review questions
# ---------------------------------------------------------------------------------------------


def _runs_twice(facts: _Facts) -> str:
    bad: list[str] = []
    good: list[str] = []
    rewritten = {w.table for w in facts.writes if w.how == "overwrite"}
    for w in facts.writes:
        if w.how in ("delete", "truncate") and w.table in rewritten:
            continue  # part of the window's delete-then-insert
        if w.how == "append":
            bad.append(f"Appends again: {w.detail} with no window delete or key.")
        elif w.how == "accumulate":
            bad.append(f"Adds again: {w.detail} is a running total.")
        elif w.how == "create":
            bad.append(f"Fails: {w.detail} (the table already exists on the rerun).")
        elif w.how == "high-water":
            bad.append(
                f"Loads nothing new: {w.detail}; a row that arrives late behind the mark is never loaded."
            )
        elif w.how in ("merge", "overwrite") and facts.project:
            good.append(f"it {w.detail}" + (" in one transaction" if w.how == "overwrite" else ""))
        elif w.how == "overwrite":
            good.append(f"it {w.detail}")
        elif w.how in ("upsert", "merge", "keyed-insert"):
            good.append(f"it upserts into {w.table} on its key ({w.detail})")
        elif w.how in ("replace", "truncate"):
            good.append(f"it replaces {w.table} whole ({w.detail})")
        elif w.how == "delete":
            good.append(f"it deletes the same rows of {w.table} again ({w.detail})")
        elif w.how == "update":
            good.append(f"it sets the same values in {w.table} again ({w.detail})")
    for e in facts.effects:
        if e.keyed:
            good.append(f"{e.what} carries an idempotency key, so the receiver drops the repeat")
        else:
            bad.append(f"Sends again: {e.what} with no idempotency key.")
    if bad:
        answer = " ".join(dict.fromkeys(bad))
    elif good:
        answer = "Nothing: " + "; ".join(dict.fromkeys(good)) + "."
    elif facts.opaque:
        answer = f"Unknown: the linter cannot see what {facts.opaque} writes; prove it with the harness."
    else:
        answer = "Nothing: it writes no table and sends no known side effect."
    clock = [w.text for w in facts.windows if w.kind in ("clock", "relative")]
    if clock and (good or bad):
        answer += " But what it reads depends on when it runs (the clock decides its window)."
    if facts.unstable:
        answer += f" And the rows it writes differ on every run: {', '.join(dict.fromkeys(facts.unstable))}."
    if facts.shared:
        answer += f" And {facts.shared[0]}."
    return answer


def _window_answer(facts: _Facts) -> str:
    for kind in ("relative", "clock", "target", "run", "param"):
        for ref in facts.windows:
            if ref.kind == kind:
                return ref.text
    if facts.writes:
        return "Nothing: it reads no window, so each run processes everything it reads."
    if facts.opaque:
        return f"Unknown: no window reference the linter can see in {facts.opaque}."
    return "Nothing: it reads no window."


def _backfill_answer(task: TaskDef, facts: _Facts) -> str:
    dag_id = task.dag_id or "<dag_id>"
    kinds = {w.kind for w in facts.windows}
    harmful = [w for w in facts.writes if w.how in ("append", "accumulate", "create")]
    effects = [e for e in facts.effects if not e.keyed]
    if "clock" in kinds or "relative" in kinds:
        return (
            "Not at all: its window comes from the clock, so all 90 backfill runs would read the same "
            "(today's) data; take the window from the run first."
        )
    if "target" in kinds:
        return (
            "Not at all: its window comes from the target's high-water mark, so a backfill of past "
            "windows reads nothing new; take the window from the run first."
        )
    if harmful:
        verb = {"append": "appended again", "accumulate": "added again", "create": "failing"}[harmful[0].how]
        return (
            f"Not safely: every window that already ran is {verb} ({harmful[0].detail}); make the write "
            "overwrite or merge first."
        )
    if effects:
        return f"Not safely: each of the 90 runs sends {effects[0].what} again; key it first."
    if not facts.writes and not facts.effects:
        if facts.opaque:
            return (
                f"Unknown: the linter cannot see what {facts.opaque} writes; run the harness "
                "(airflow_idempotent.testing) over a few windows before a backfill."
            )
        return "Nothing to backfill: it writes no table."
    caveat = ""
    if facts.unstable:
        caveat = f", but the rewritten rows get new values from {', '.join(dict.fromkeys(facts.unstable))}"
    if facts.shared:
        caveat += f"; and {facts.shared[0]}, so backfill that writer too or the two disagree"
    schedule = None
    if task.dag is not None:
        node = task.dag.kwargs.get("schedule", task.dag.kwargs.get("schedule_interval"))
        schedule = _schedule_period(task.dag.scope, node)[1]
    if task.dag is not None and schedule is None:
        return (
            "One window at a time: the DAG has no time schedule, so trigger each window with "
            f"`airflow dags trigger {dag_id} --logical-date YYYY-MM-DD`; each rewrites only itself"
            f"{caveat}."
        )
    if "run" not in kinds and "param" not in kinds and facts.writes:
        return (
            "No need: it rewrites what it writes from everything it reads, so one run covers all 90 "
            f"days; a backfill of every window repeats the same full rewrite{caveat}."
        )
    what = "each window rewrites only itself" if facts.writes else "each window's effect carries its own key"
    return (
        f"`airflow backfill create --dag-id {dag_id} --from-date <90 days ago> --to-date <yesterday> "
        f"--reprocess-behavior completed`: {what}{caveat}."
    )


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def _looks_like_dag_file(path: Path) -> bool:
    """Airflow's own safe-mode test: both 'airflow' and 'dag' appear in the file."""
    try:
        head = path.read_bytes()
    except OSError:
        return False
    lower = head.lower()
    return b"airflow" in lower and b"dag" in lower


def _python_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
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


def _acknowledge(findings: list[Finding], linter: _Linter) -> None:
    by_display = {src.display: src for src in linter.sources.values()}
    for f in findings:
        places = [(f.file, f.line), (f.file, f.line - 1)]
        for file, line in f.anchors:
            places.extend([(file, line), (file, line - 1)])
        for file, line in places:
            src = by_display.get(file)
            if src is None:
                continue
            acks = src.acks.get(line, {})
            if f.rule in acks:
                f.acknowledged = True
                f.reason = acks[f.rule]
                break


def lint_paths(
    paths: Iterable[str | os.PathLike[str]], ignore: Iterable[str] = (), dialect: str | None = None
) -> LintReport:
    """Lint DAG files (directories are searched for them) and return every finding and task."""
    ignored = tuple(sorted({rid for token in ignore if (rid := _rule_id(token)) is not None}))
    linter = _Linter(dialect)
    for path in _python_files(paths):
        linter.lint_file(path)
    linter.cross_task()
    unique: dict[tuple[str, str, int, str], Finding] = {}
    for f in linter.findings:
        if f.rule not in ignored:
            unique.setdefault((f.rule, f.file, f.line, f.message), f)
    findings = sorted(unique.values(), key=lambda f: (f.file, f.line, f.rule))
    _acknowledge(findings, linter)
    return LintReport(files=linter.files, findings=findings, tasks=linter.task_reports(), ignored=ignored)


def _rule_list() -> str:
    return "\n".join(f"  {r.id}  {r.name:<28} {r.summary}" for r in RULES.values())


def register(subparsers: Any) -> None:
    """Add the `lint` subcommand to an argparse subparsers object (handler: `run`)."""
    p = subparsers.add_parser(
        "lint",
        help="find the shapes that make a rerun unsafe in DAG files and their SQL",
        description=(
            "Read DAG files (never import them) and their SQL, and report what makes a rerun unsafe, "
            "with file:line and the fix. For each task, answer: if this runs twice? what decides its "
            "window? how would we backfill the last 90 days?"
        ),
        epilog=(
            "Rules:\n" + _rule_list() + "\n\nAcknowledge a finding with a comment on its line or the line "
            "above: `# idempotent: ack IDEM002 reason` (in SQL: `-- idempotent: ack IDEM002 reason`). "
            "Exit status: 0 no unacknowledged finding, 1 findings, 2 usage error."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="DAG files or folders of DAG files")
    p.add_argument("--json", action="store_true", help="print one JSON document (same as --format json)")
    p.add_argument("--format", choices=("text", "json"), default=None, help="output format (default text)")
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="RULE",
        help="leave out a rule (ID or name; repeat or comma-separate)",
    )
    p.add_argument(
        "--dialect",
        choices=DIALECTS,
        default=None,
        help="SQL dialect of the SQL (default: from the operator or connection, else the first that parses)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the `lint` subcommand: 0 clean, 1 findings, 2 usage error."""
    fmt = getattr(args, "format", None)
    if getattr(args, "json", False):
        if fmt == "text":
            print(
                "airflow-idempotent lint: error: --json and --format text contradict each other",
                file=sys.stderr,
            )
            return 2
        fmt = "json"
    ignore: list[str] = []
    for token in getattr(args, "ignore", None) or []:
        for part in str(token).split(","):
            if not part.strip():
                continue
            if _rule_id(part) is None:
                known = ", ".join(f"{r.id} ({r.name})" for r in RULES.values())
                print(
                    f"airflow-idempotent lint: error: unknown rule {part.strip()!r}: use one of {known}",
                    file=sys.stderr,
                )
                return 2
            ignore.append(part)
    try:
        report = lint_paths(args.paths, ignore=ignore, dialect=getattr(args, "dialect", None))
    except FileNotFoundError as err:
        print(f"airflow-idempotent lint: error: {err}", file=sys.stderr)
        return 2
    if not report.files:
        print(
            "airflow-idempotent lint: error: no DAG files found (a folder's .py files must mention both "
            "'airflow' and 'dag'; name a file to lint it anyway)",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(report.to_json() + "\n" if fmt == "json" else report.to_text())
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m airflow_idempotent.daglint PATH...`: the lint subcommand on its own."""
    parser = argparse.ArgumentParser(prog="airflow-idempotent")
    register(parser.add_subparsers(dest="command"))
    try:
        args = parser.parse_args(["lint", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

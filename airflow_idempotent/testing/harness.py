"""Prove a DAG or a task idempotent: run a window N times with crashes, compare with one clean run.

    from airflow_idempotent.testing import check_idempotent

    report = check_idempotent(dag, "2026-05-01", engine=engine)     # a DAG, a task, or a DAG file
    assert report.ok, report.text()

What it does, for one window:

1. snapshots the target tables (their whole content), then runs the DAG (or task) once with no
   crash: the **clean run**; its targets' checksums are the reference;
2. for every **scenario** it restores the snapshot, then makes the attempts of the scenario: N
   complete runs; or a crash at a chosen point of one writing task, then reruns; or random crashes
   (seeded, reproducible);
3. compares every target table with the clean run and, where they differ, says which rows are
   duplicated, missing or extra and which values drift, naming them by key, and which task
   writes that table (the task that broke the property).

Every attempt of every task runs in a **child process** (forked: the operator object needs no
pickling, and the child's rendering of templates never touches the caller's object). A crash is
real: the child sends itself SIGKILL at the chosen point, so nothing after it runs, no ``finally``,
no rollback but the database's own.

Crash points:

``before``
    the project's operators: just before the first write statement (after the lock and the
    checks); any other operator: just before ``execute()``.
``during``
    the project's operators: right after the N-th write statement (DELETE, INSERT, upsert) of
    the transaction, before commit; SQL operators (common-sql hooks) running two or more
    statements: right after the N-th statement, before the hook commits. Not available for a
    single SQL statement (it is atomic) or for Python code.
``after_commit``
    the project's operators: after the write committed, before the history record and before
    the task returns; any other operator: right after ``execute()`` returned.

The harness computes its own checksums with plain ``SELECT``s through SQLAlchemy and normalises
values in Python (never the product's checksum), so a bug in the product cannot hide itself.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import json
import os
import random
import re
import select
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

__all__ = [
    "CRASH_POINTS",
    "Attempt",
    "Crash",
    "Harness",
    "HarnessError",
    "HarnessReport",
    "NotIdempotentError",
    "ScenarioResult",
    "TableDiff",
    "TableState",
    "assert_idempotent",
    "check_idempotent",
    "compare_tables",
    "load_dag",
]

CRASH_POINTS: tuple[str, ...] = ("before", "during", "after_commit")
#: How many offending keys or rows a report names per kind of difference (text; JSON).
SAMPLE = 5
JSON_SAMPLE = 100
_WRITE_KEYS = frozenset({"delete", "insert", "update", "merge"})
_KEY_COLUMN = re.compile(r"^(id|.+_id)$", re.IGNORECASE)


class HarnessError(Exception):
    """The harness cannot run the check (bad input, a clean run that fails): says why and how to fix it."""


class NotIdempotentError(AssertionError):
    """A rerun left the targets different from one clean run; the message is the report."""

    def __init__(self, report: HarnessReport) -> None:
        super().__init__(report.text())
        self.report = report


# ---------------------------------------------------------------------------------------------
# Crashes and scenarios
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Crash:
    """Where an attempt kills itself: a crash point, and for `during` after which write statement."""

    point: str
    statement: int = 1

    def __post_init__(self) -> None:
        if self.point not in CRASH_POINTS:
            raise HarnessError(f"unknown crash point {self.point!r}: use one of {', '.join(CRASH_POINTS)}")
        if self.statement < 1:
            raise HarnessError(f"statement must be >= 1 (got {self.statement})")

    def label(self) -> str:
        if self.point == "during":
            return f"during (after write statement {self.statement})"
        return "after commit" if self.point == "after_commit" else "before the write"


@dataclass(frozen=True)
class _Scenario:
    name: str
    #: per attempt: None (run to the end) or (task_id, crash)
    attempts: tuple[tuple[str, Crash] | None, ...]
    crash_task: str | None = None


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class TableState:
    """A table's whole content as the harness read it: columns and normalised rows."""

    table: str
    exists: bool
    columns: tuple[str, ...] = ()
    rows: Counter[tuple[str | None, ...]] = field(default_factory=Counter)

    @property
    def row_count(self) -> int:
        return sum(self.rows.values())

    @property
    def checksum(self) -> str:
        """Order-independent sha256 of the normalised rows (and the column names)."""
        digest = hashlib.sha256("|".join(self.columns).encode())
        for row in sorted(self.rows.elements(), key=_sort_key):
            digest.update(("\x1f".join("\x00" if v is None else v for v in row) + "\n").encode())
        return digest.hexdigest() if self.exists else "absent"

    def describe(self) -> str:
        if not self.exists:
            return f"{self.table}: absent"
        return f"{self.table} {self.row_count:,} rows (sha256 {self.checksum[:12]})"


def _sort_key(row: tuple[str | None, ...]) -> tuple[tuple[bool, str], ...]:
    return tuple((v is None, v or "") for v in row)


@dataclass
class TableDiff:
    """How a table after the scenario differs from the clean run, named by key."""

    table: str
    key: tuple[str, ...]
    expected: TableState
    actual: TableState
    duplicated: list[tuple[tuple[str | None, ...], int, int]] = field(default_factory=list)
    missing: list[tuple[tuple[str | None, ...], int]] = field(default_factory=list)
    extra: list[tuple[tuple[str | None, ...], int]] = field(default_factory=list)
    drifted: list[tuple[tuple[str | None, ...], dict[str, tuple[str | None, str | None]]]] = field(
        default_factory=list
    )
    writers: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.expected.checksum == self.actual.checksum

    @property
    def kinds(self) -> list[str]:
        """What went wrong, in words: "rows duplicated", "rows missing", "rows extra", "values drifting"."""
        out = []
        if not self.actual.exists and self.expected.exists:
            out.append("table missing")
        if self.duplicated:
            out.append("rows duplicated")
        if self.missing:
            out.append("rows missing")
        if self.extra:
            out.append("rows extra")
        if self.drifted:
            out.append("values drifting")
        if not out and not self.ok:
            out.append("content differs")
        return out

    def _name(self, values: tuple[str | None, ...]) -> str:
        if len(self.key) == 1:
            return f"{self.key[0]} {values[0]}"
        return "(" + ", ".join(f"{k}={v}" for k, v in zip(self.key, values, strict=False)) + ")"

    def describe(self) -> str:
        """One paragraph: counts, then the offending keys or rows by name."""
        if self.ok:
            return f"{self.table}: same as the clean run ({self.actual.row_count:,} rows)"
        if not self.actual.exists:
            return f"{self.table}: absent, but the clean run left {self.expected.row_count:,} rows"
        parts = [
            f"{self.table}: {self.actual.row_count:,} rows, the clean run has {self.expected.row_count:,}"
        ]
        if self.duplicated:
            total = sum(actual - expected for _, actual, expected in self.duplicated)
            expected_counts = {expected for _, _, expected in self.duplicated}
            same = len(expected_counts) == 1
            named = ", ".join(
                f"{self._name(k) if i == 0 or len(self.key) > 1 else k[0]} x{actual}"
                + ("" if same else f" (expected {expected})")
                for i, (k, actual, expected) in enumerate(self.duplicated[:SAMPLE])
            )
            each = f" (expected {expected_counts.pop()} each)" if same else ""
            parts.append(
                f"rows duplicated: {len(self.duplicated):,} {self._what()} ({total:,} extra copies), e.g. "
                f"{named}{_more(len(self.duplicated))}{each}"
            )
        if self.missing:
            named = ", ".join(self._name(k) for k, _ in self.missing[:SAMPLE])
            parts.append(f"rows missing: {len(self.missing):,}, e.g. {named}{_more(len(self.missing))}")
        if self.extra:
            named = ", ".join(self._name(k) for k, _ in self.extra[:SAMPLE])
            parts.append(f"rows extra: {len(self.extra):,}, e.g. {named}{_more(len(self.extra))}")
        if self.drifted:
            shown = []
            for k, changes in self.drifted[:SAMPLE]:
                change = ", ".join(f"{col} {old} -> {new}" for col, (old, new) in changes.items())
                shown.append(f"{self._name(k)}: {change}")
            parts.append(
                f"values drifting: {len(self.drifted):,} {self._what()}, e.g. {'; '.join(shown)}"
                f"{_more(len(self.drifted))}"
            )
        return "; ".join(parts)

    def _what(self) -> str:
        return "keys" if self.key != self.expected.columns else "rows"

    def as_dict(self) -> dict[str, Any]:
        def named(values: tuple[str | None, ...]) -> dict[str, str | None]:
            return dict(zip(self.key, values, strict=False))

        return {
            "table": self.table,
            "ok": self.ok,
            "kinds": self.kinds,
            "key": list(self.key),
            "writers": self.writers,
            "expected": {"rows": self.expected.row_count, "checksum": self.expected.checksum},
            "actual": {"rows": self.actual.row_count, "checksum": self.actual.checksum},
            "counts": {
                "duplicated": len(self.duplicated),
                "missing": len(self.missing),
                "extra": len(self.extra),
                "drifted": len(self.drifted),
            },
            # at most JSON_SAMPLE of each, named by key
            "duplicated": [
                {"key": named(k), "copies": a, "expected": e} for k, a, e in self.duplicated[:JSON_SAMPLE]
            ],
            "missing": [{"key": named(k), "copies": n} for k, n in self.missing[:JSON_SAMPLE]],
            "extra": [{"key": named(k), "copies": n} for k, n in self.extra[:JSON_SAMPLE]],
            "drifted": [
                {"key": named(k), "changes": {c: {"clean": o, "actual": n} for c, (o, n) in ch.items()}}
                for k, ch in self.drifted[:JSON_SAMPLE]
            ],
        }


def _more(count: int) -> str:
    return f" and {count - SAMPLE:,} more" if count > SAMPLE else ""


@dataclass
class Attempt:
    """One attempt of one task in a scenario."""

    task_id: str
    crash: Crash | None
    outcome: str
    """completed, crashed, failed, or "completed (crash point not reached)"."""
    detail: str = ""
    seconds: float = 0.0

    def describe(self) -> str:
        planned = f" [crash {self.crash.label()}]" if self.crash else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.task_id}{planned} {self.outcome} in {self.seconds:.2f}s{detail}"


@dataclass
class ScenarioResult:
    name: str
    crash_task: str | None
    attempts: list[Attempt]
    diffs: list[TableDiff]
    note: str | None = None

    @property
    def ok(self) -> bool:
        return all(d.ok for d in self.diffs)

    def culprits(self) -> list[str]:
        """Who broke the property: the crashed task if it writes a broken table, else the table's writers."""
        out: list[str] = []
        for diff in self.diffs:
            if diff.ok:
                continue
            if self.crash_task is not None and self.crash_task in diff.writers:
                names = [self.crash_task]
            else:
                names = diff.writers or ["(no declared writer)"]
            out.extend(n for n in names if n not in out)
        return out


@dataclass
class HarnessReport:
    """The verdict for one subject and window: the clean run, every scenario, and who broke what."""

    subject: str
    window: str
    runs: int
    seed: int | None
    operators: dict[str, str]
    targets: dict[str, list[str]]
    clean: dict[str, TableState]
    scenarios: list[ScenarioResult]
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.scenarios)

    def broken(self) -> dict[str, list[str]]:
        """{task_id: ["<scenario>: <how>", ...]} for every task that broke the property."""
        out: dict[str, list[str]] = {}
        for scenario in self.scenarios:
            for task_id in scenario.culprits():
                kinds = sorted(
                    {
                        k
                        for d in scenario.diffs
                        if not d.ok and task_id in (d.writers or [task_id])
                        for k in d.kinds
                    }
                )
                out.setdefault(task_id, []).append(f"{scenario.name}: {', '.join(kinds)}")
        return out

    def text(self) -> str:
        lines = [
            f"Idempotency of {self.subject} for window {self.window}: "
            + ("PASS" if self.ok else "FAIL")
            + f" ({len(self.scenarios)} scenario(s), {self.runs} run(s) each"
            + (f", seed {self.seed}" if self.seed is not None else "")
            + ")",
            "clean run: " + "; ".join(state.describe() for state in self.clean.values()),
        ]
        for scenario in self.scenarios:
            lines.append(f"{'ok  ' if scenario.ok else 'FAIL'}  {scenario.name}")
            for attempt in scenario.attempts:
                if attempt.outcome != "completed" or attempt.crash is not None:
                    lines.append(f"        {attempt.describe()}")
            for diff in scenario.diffs:
                if not diff.ok:
                    writers = f" (written by {', '.join(diff.writers)})" if diff.writers else ""
                    lines.append(f"        {diff.describe()}{writers}")
            if scenario.note:
                lines.append(f"        note: {scenario.note}")
        lines.extend(f"skipped: {s}" for s in self.skipped)
        broken = self.broken()
        for task_id, hows in broken.items():
            operator = self.operators.get(task_id, "?")
            lines.append(f"BROKEN by {task_id} ({operator}): " + "; ".join(hows))
        return "\n".join(lines) + "\n"

    def as_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "window": self.window,
            "ok": self.ok,
            "runs": self.runs,
            "seed": self.seed,
            "targets": self.targets,
            "clean": {t: {"rows": s.row_count, "checksum": s.checksum} for t, s in self.clean.items()},
            "scenarios": [
                {
                    "name": s.name,
                    "ok": s.ok,
                    "crash_task": s.crash_task,
                    "attempts": [
                        {
                            "task_id": a.task_id,
                            "crash": a.crash.label() if a.crash else None,
                            "outcome": a.outcome,
                            "detail": a.detail,
                            "seconds": round(a.seconds, 3),
                        }
                        for a in s.attempts
                    ],
                    "diffs": [d.as_dict() for d in s.diffs],
                    "note": s.note,
                }
                for s in self.scenarios
            ],
            "broken": self.broken(),
            "skipped": self.skipped,
        }


# ---------------------------------------------------------------------------------------------
# Reading and restoring tables (plain SQL through SQLAlchemy Core, values normalised in Python)
# ---------------------------------------------------------------------------------------------


def normalise(value: Any) -> str | None:
    """One value as text that compares equal across runs of the same database."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        if value.is_nan():
            return "NaN"
        text = format(value.normalize(), "f")
        return "0" if text in ("-0", "0") else text
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def _split(table: str) -> tuple[str | None, str]:
    schema, _, name = table.rpartition(".")
    return (schema or None), name


def _quoted(dialect: sa.Dialect, table: str) -> str:
    """The table's name quoted by the database's own rules (the names come from the DAG, not from data)."""
    preparer = dialect.identifier_preparer
    schema, name = _split(table)
    return (f"{preparer.quote_schema(schema)}." if schema else "") + preparer.quote(name)


def _exists(conn: sa.Connection, table: str) -> bool:
    schema, name = _split(table)
    return bool(sa.inspect(conn).has_table(name, schema=schema))


def read_table(engine: Engine, table: str) -> TableState:
    """The table's whole content (a plain SELECT *), normalised; or "absent"."""
    with engine.connect() as conn:
        if not _exists(conn, table):
            return TableState(table, exists=False)
        result = conn.execute(sa.text(f"SELECT * FROM {_quoted(engine.dialect, table)}"))
        columns = tuple(result.keys())
        rows = Counter(tuple(normalise(v) for v in row) for row in result)
    return TableState(table, True, columns, rows)


@dataclass
class _Snapshot:
    """A table's raw content, to put back before each scenario."""

    table: str
    exists: bool
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def _snapshot(engine: Engine, table: str) -> _Snapshot:
    with engine.connect() as conn:
        if not _exists(conn, table):
            return _Snapshot(table, False)
        result = conn.execute(sa.text(f"SELECT * FROM {_quoted(engine.dialect, table)}"))
        return _Snapshot(table, True, tuple(result.keys()), [tuple(row) for row in result])


def _restore(engine: Engine, snapshot: _Snapshot) -> None:
    """Put the table back as it was: the same rows, or absent if it was absent."""
    name = _quoted(engine.dialect, snapshot.table)
    with engine.begin() as conn:
        exists = _exists(conn, snapshot.table)
        if not snapshot.exists:
            if exists:
                conn.execute(sa.text(f"DROP TABLE {name}"))
            return
        if not exists:
            raise HarnessError(
                f"{snapshot.table} existed before the check but a task dropped it, so the harness cannot "
                "put it back: pass reset=<a function that recreates the starting state>"
            )
        conn.execute(sa.text(f"DELETE FROM {name}"))
        if snapshot.rows:
            preparer = engine.dialect.identifier_preparer
            columns = ", ".join(preparer.quote(c) for c in snapshot.columns)
            values = ", ".join(f":p{i}" for i in range(len(snapshot.columns)))
            conn.execute(
                sa.text(f"INSERT INTO {name} ({columns}) VALUES ({values})"),
                [{f"p{i}": v for i, v in enumerate(row)} for row in snapshot.rows],
            )


def _key_columns(
    engine: Engine, table: str, declared: Sequence[str] | None, clean: TableState
) -> tuple[str, ...]:
    """The columns that identify a row: declared, else the primary key or a unique constraint or
    index, else an `id` / `*_id` column unique in the clean run, else the whole row."""
    columns = clean.columns
    lower = {c.lower(): c for c in columns}
    if declared:
        return tuple(lower.get(k.lower(), k) for k in declared)
    schema, name = _split(table)
    with contextlib.suppress(Exception), engine.connect() as conn:
        inspector = sa.inspect(conn)
        pk = inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or []
        if pk:
            return tuple(pk)
        for unique in inspector.get_unique_constraints(name, schema=schema):
            if unique.get("column_names"):
                return tuple(unique["column_names"])
        for index in inspector.get_indexes(name, schema=schema):
            if index.get("unique") and index.get("column_names"):
                return tuple(c for c in index["column_names"] if c)
    for i, column in enumerate(columns):
        if _KEY_COLUMN.fullmatch(column):
            values = [row[i] for row in clean.rows.elements()]
            if None not in values and len(set(values)) == len(values) and values:
                return (column,)
    return columns


def compare_tables(expected: TableState, actual: TableState, key: Sequence[str] = ()) -> TableDiff:
    """How `actual` differs from `expected`, named by the `key` columns (the whole row when empty)."""
    columns = expected.columns or actual.columns
    key = tuple(key) or columns
    diff = TableDiff(expected.table, key, expected, actual)
    if diff.ok or not actual.exists or not expected.exists:
        if not expected.exists and actual.exists:
            diff.extra = [(row, n) for row, n in sorted(actual.rows.items(), key=lambda i: _sort_key(i[0]))]
        return diff
    positions = [columns.index(k) for k in key if k in columns]
    if len(positions) != len(key) or actual.columns != expected.columns:
        positions = list(range(len(columns)))
        diff.key = columns

    def grouped(state: TableState) -> dict[tuple[str | None, ...], Counter[tuple[str | None, ...]]]:
        out: dict[tuple[str | None, ...], Counter[tuple[str | None, ...]]] = {}
        for row, count in state.rows.items():
            out.setdefault(tuple(row[p] for p in positions), Counter())[row] += count
        return out

    want, got = grouped(expected), grouped(actual)
    for k in sorted(set(want) | set(got), key=_sort_key):
        w, g = want.get(k, Counter()), got.get(k, Counter())
        nw, ng = sum(w.values()), sum(g.values())
        if ng == 0:
            diff.missing.append((k, nw))
        elif nw == 0:
            diff.extra.append((k, ng))
        elif ng > nw:
            diff.duplicated.append((k, ng, nw))
        elif ng < nw:
            diff.missing.append((k, nw - ng))
        elif w != g:
            changes: dict[str, tuple[str | None, str | None]] = {}
            old, new = next(iter(w - g), None), next(iter(g - w), None)
            if old is not None and new is not None:
                for i, column in enumerate(columns):
                    if old[i] != new[i]:
                        changes[column] = (old[i], new[i])
            diff.drifted.append((k, changes))
    return diff


# ---------------------------------------------------------------------------------------------
# The run's context, as Airflow would hand it to execute()
# ---------------------------------------------------------------------------------------------


class _DagRun:
    def __init__(self, dag_id: str, run_id: str, logical_date: Any, conf: Mapping[str, Any]) -> None:
        self.dag_id = dag_id
        self.run_id = run_id
        self.logical_date = logical_date
        self.conf = dict(conf)
        self.run_type = "manual"


class _TaskInstance:
    """What task code and templates read from `ti`: identity and XComs of this attempt's run."""

    def __init__(
        self, dag_id: str, task_id: str, run_id: str, try_number: int, xcoms: dict[str, Any]
    ) -> None:
        self.dag_id = dag_id
        self.task_id = task_id
        self.run_id = run_id
        self.try_number = try_number
        self.map_index = -1
        self.xcoms = xcoms

    def xcom_pull(
        self, task_ids: Any = None, key: str = "return_value", default: Any = None, **_: Any
    ) -> Any:
        if key != "return_value":
            return default
        if isinstance(task_ids, str):
            return self.xcoms.get(task_ids, default)
        if task_ids is None:
            return default
        return [self.xcoms.get(t, default) for t in task_ids]

    def xcom_push(self, key: str, value: Any, **_: Any) -> None:
        if key == "return_value":
            self.xcoms[self.task_id] = value


def _window(window: Any, width: timedelta | None) -> tuple[Any, Any]:
    """(start, end) as aware pendulum datetimes from a day, a datetime, an ISO string or a pair."""
    import pendulum

    def instant(value: Any) -> Any:
        if isinstance(value, str):
            value = pendulum.parse(value)
        if isinstance(value, datetime):
            dt = pendulum.instance(value if value.tzinfo else value.replace(tzinfo=timezone.utc))
            return dt.in_timezone("UTC")
        if isinstance(value, date):
            return pendulum.datetime(value.year, value.month, value.day, tz="UTC")
        raise HarnessError(
            f"window {window!r} is not a date, datetime, ISO string or (start, end) pair: "
            "give e.g. '2026-05-01' or (datetime(2026, 5, 1), datetime(2026, 5, 2))"
        )

    if isinstance(window, tuple | list):
        if len(window) != 2:
            raise HarnessError(f"window {window!r}: give (start, end)")
        start, end = instant(window[0]), instant(window[1])
    else:
        start = instant(window)
        end = start + (width or timedelta(days=1))
    if end <= start:
        raise HarnessError(f"window {window!r} is empty: end must be after start")
    return start, end


def _params(task: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    dag = task.dag if task.has_dag() else None
    for source in (getattr(dag, "params", None), getattr(task, "params", None)):
        if source is None:
            continue
        with contextlib.suppress(Exception):
            for name in source:
                params[name] = source[name]
    params.update(overrides)
    return params


def _context(
    task: Any,
    start: Any,
    end: Any,
    run_id: str,
    try_number: int,
    xcoms: dict[str, Any],
    params: Mapping[str, Any],
    conf: Mapping[str, Any],
) -> dict[str, Any]:
    dag = task.dag if task.has_dag() else None
    dag_id = dag.dag_id if dag is not None else "adhoc"
    ti = _TaskInstance(dag_id, task.task_id, run_id, try_number, xcoms)
    context: dict[str, Any] = {
        "logical_date": start,
        "data_interval_start": start,
        "data_interval_end": end,
        "ds": start.strftime("%Y-%m-%d"),
        "ds_nodash": start.strftime("%Y%m%d"),
        "ts": start.isoformat(),
        "ts_nodash": start.strftime("%Y%m%dT%H%M%S"),
        "run_id": run_id,
        "params": {**_params(task, {}), **params, **conf},
        "dag_run": _DagRun(dag_id, run_id, start, conf),
        "ti": ti,
        "task_instance": ti,
        "task": task,
        "dag": dag,
        "conf": None,
        "inlets": [],
        "outlets": list(getattr(task, "outlets", []) or []),
    }
    with contextlib.suppress(ImportError):
        from airflow.sdk.execution_time import macros

        context["macros"] = macros
    return context


# ---------------------------------------------------------------------------------------------
# One attempt in a child process
# ---------------------------------------------------------------------------------------------


def _kind(task: Any) -> str:
    """project (this package's operators), sql (common-sql hooks) or other."""
    from airflow_idempotent.operators.base import WindowWriteOperator

    if isinstance(task, WindowWriteOperator):
        return "project"
    if hasattr(task, "get_db_hook") and getattr(task, "sql", None):
        return "sql"
    return "other"


def _sql_statements(task: Any) -> int:
    sql = getattr(task, "sql", None)
    if isinstance(sql, list | tuple):
        return len(sql)
    if isinstance(sql, str) and getattr(task, "split_statements", False):
        return len([s for s in sql.split(";") if s.strip()])
    return 1


def crash_points(task: Any) -> list[str]:
    """The crash points available for a task (see the module's docstring)."""
    kind = _kind(task)
    if kind == "project":
        return list(CRASH_POINTS)
    if kind == "sql" and _sql_statements(task) >= 2:
        return list(CRASH_POINTS)
    return ["before", "after_commit"]


def _die(channel: int, crash: Crash, what: str) -> None:
    os.write(channel, (json.dumps({"status": "crashing", "at": what}) + "\n").encode())
    os.kill(os.getpid(), signal.SIGKILL)


def _install_crash(task: Any, crash: Crash, channel: int) -> Callable[[str], None]:
    """Patch (in the child only) the place where `crash` strikes; return the before/after hook."""
    kind = _kind(task)
    state = {"writes": 0}
    if kind == "project":
        from airflow_idempotent.adapters.base import EngineAdapter

        real_execute = EngineAdapter.execute

        def execute(self: Any, conn: Any, expression: Any, params: Any) -> Any:
            write = getattr(expression, "key", "") in _WRITE_KEYS
            if write:
                state["writes"] += 1
                if crash.point == "before" and state["writes"] == 1:
                    _die(channel, crash, f"before {expression.key.upper()} (nothing written)")
            result = real_execute(self, conn, expression, params)
            if write and crash.point == "during" and state["writes"] == crash.statement:
                _die(channel, crash, f"after {expression.key.upper()} #{crash.statement}, before commit")
            return result

        EngineAdapter.execute = execute  # type: ignore[method-assign]
        cls = type(task)
        real_write = cls.write

        def write(self: Any, adapter: Any, spec: Any) -> Any:
            result = real_write(self, adapter, spec)
            if crash.point == "after_commit":
                _die(channel, crash, "committed, before the history record")
            return result

        cls.write = write  # type: ignore[method-assign]
        return lambda phase: None
    if kind == "sql" and crash.point == "during":
        from airflow.providers.common.sql.hooks.sql import DbApiHook

        real_run = DbApiHook._run_command

        def run_command(self: Any, cur: Any, sql_statement: Any, parameters: Any) -> Any:
            result = real_run(self, cur, sql_statement, parameters)
            state["writes"] += 1
            if state["writes"] == crash.statement:
                _die(channel, crash, f"after statement #{crash.statement}, before the hook commits")
            return result

        DbApiHook._run_command = run_command  # type: ignore[method-assign]

    def hook(phase: str) -> None:
        if phase == "before" and crash.point == "before":
            _die(channel, crash, "before execute()")
        if phase == "after" and crash.point == "after_commit":
            _die(channel, crash, "after execute() returned")

    return hook


def _child(task: Any, context: dict[str, Any], crash: Crash | None, channel: int) -> Any:
    from airflow.sdk.bases.operator import ExecutorSafeguard

    ExecutorSafeguard.test_mode = True  # execute() outside the task runner, on purpose
    task = task.prepare_for_execution()  # what the task runner does: a locked copy
    context["task"] = task
    hook = _install_crash(task, crash, channel) if crash is not None else (lambda phase: None)
    task.render_template_fields(context)
    hook("before")
    value = task.execute(context)
    hook("after")
    return value


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)[:2000]


@dataclass
class _ChildResult:
    status: str  # ok, error, crashed, killed, timeout
    value: Any = None
    error: str = ""
    log: str = ""
    seconds: float = 0.0


def _redirect_output(fd: int) -> None:
    """In the child: send fds 1 and 2, and whatever fds sys.stdout/stderr write to (pytest's capture
    files, the logging handlers' streams), to the attempt's log."""
    targets = {1, 2}
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            targets.add(stream.fileno())  # type: ignore[union-attr]
    for target in targets:
        with contextlib.suppress(OSError):
            os.dup2(fd, target)


def _run_attempt(task: Any, context: dict[str, Any], crash: Crash | None, timeout: float) -> _ChildResult:
    """Fork; the child renders and executes the task (crashing where told); read what it reported."""
    read_end, write_end = os.pipe()
    log = tempfile.TemporaryFile()  # noqa: SIM115 (the child writes it; closed below)
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)
            _redirect_output(log.fileno())
            value = _child(task, context, crash, write_end)
            os.write(write_end, (json.dumps({"status": "ok", "value": _jsonable(value)}) + "\n").encode())
            code = 0
        except BaseException as err:  # report everything, then leave without running the parent's cleanup
            message = f"{type(err).__name__}: {err}"
            with contextlib.suppress(Exception):
                os.write(
                    write_end, (json.dumps({"status": "error", "error": message[:4000]}) + "\n").encode()
                )
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = started + timeout
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_end], [], [], remaining)
            if not ready:
                continue
            data = os.read(read_end, 65536)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(read_end)
    if timed_out:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    seconds = time.monotonic() - started
    log.seek(0)
    output = log.read().decode("utf-8", errors="replace")
    log.close()
    messages = [json.loads(line) for line in b"".join(chunks).decode().splitlines() if line.strip()]
    last = messages[-1] if messages else {}
    if timed_out:
        return _ChildResult("timeout", error=f"no result after {timeout:.0f}s", log=output, seconds=seconds)
    if os.WIFSIGNALED(status):
        if last.get("status") == "crashing":
            return _ChildResult("crashed", error=str(last.get("at")), log=output, seconds=seconds)
        return _ChildResult(
            "killed", error=f"killed by signal {os.WTERMSIG(status)}", log=output, seconds=seconds
        )
    if last.get("status") == "ok":
        return _ChildResult("ok", value=last.get("value"), log=output, seconds=seconds)
    return _ChildResult(
        "error", error=str(last.get("error") or f"exit status {status}"), log=output, seconds=seconds
    )


# ---------------------------------------------------------------------------------------------
# Loading DAGs (the harness runs the user's code: importing the DAG file is expected here)
# ---------------------------------------------------------------------------------------------


def load_dag(path: str | os.PathLike[str], dag_id: str | None = None) -> Any:
    """Import a DAG file and return its DAG `dag_id` (or its only DAG)."""
    from airflow.sdk import DAG
    from airflow.sdk.definitions._internal.contextmanager import DagContext

    file = Path(path).resolve()
    if not file.is_file():
        raise HarnessError(f"no DAG file at {file}")
    name = f"idempotency_dag_{hashlib.sha1(str(file).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise HarnessError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    previous = DagContext.current_autoregister_module_name
    DagContext.current_autoregister_module_name = name
    try:
        spec.loader.exec_module(module)
    finally:
        DagContext.current_autoregister_module_name = previous
    dags: dict[str, Any] = {}
    for dag, mod in list(DagContext.autoregistered_dags):
        if mod is module:
            dags[dag.dag_id] = dag
    for value in vars(module).values():
        if isinstance(value, DAG):
            dags[value.dag_id] = value
    if dag_id is not None:
        if dag_id not in dags:
            raise HarnessError(f"{file} has no DAG {dag_id!r}: it has {', '.join(sorted(dags)) or 'none'}")
        return dags[dag_id]
    if len(dags) != 1:
        raise HarnessError(f"{file} has {len(dags)} DAGs ({', '.join(sorted(dags))}): pass dag_id=...")
    return next(iter(dags.values()))


# ---------------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------------


def _targets_of(task: Any, declared: Sequence[str] | None) -> list[str]:
    """A task's target tables: declared; the project operator's table; the tables its SQL writes."""
    if declared is not None:
        return [declared] if isinstance(declared, str) else list(declared)
    kind = _kind(task)
    if kind == "project":
        return [task.table]
    sql = getattr(task, "sql", None)
    if kind == "sql" and sql:
        from airflow_idempotent.daglint import sql_writes

        text = ";\n".join(sql) if isinstance(sql, list | tuple) else str(sql)
        if text.strip().lower().endswith(".sql"):  # a template file: read it as Airflow would
            resolved = copy.copy(task)
            with contextlib.suppress(Exception):
                resolved.resolve_template_files()
            sql = getattr(resolved, "sql", None)
            text = ";\n".join(sql) if isinstance(sql, list | tuple) else str(sql or "")
            if text.strip().lower().endswith(".sql"):
                return []
        tables: list[str] = []
        for write in sql_writes(text):
            if write.how not in ("create", "drop") and write.table not in tables:
                tables.append(write.table)
        return tables
    return []


def _engine(engine: Engine | str | None, tasks: Sequence[Any]) -> Engine:
    if isinstance(engine, Engine):
        return sa.create_engine(engine.url, poolclass=NullPool)
    if isinstance(engine, str):
        return sa.create_engine(engine, poolclass=NullPool)
    from airflow_idempotent.hooks.warehouse import WarehouseHook

    for task in tasks:
        conn_id = getattr(task, "conn_id", None)
        if isinstance(conn_id, str):
            return sa.create_engine(WarehouseHook(conn_id=conn_id).sqlalchemy_url, poolclass=NullPool)
    raise HarnessError("no engine given and no task has a conn_id: pass engine=<SQLAlchemy engine or URL>")


def _plan(
    tasks: Sequence[Any],
    writers: Sequence[Any],
    runs: int,
    crashes: str | Sequence[str],
    seed: int | None,
    random_scenarios: int,
) -> tuple[list[_Scenario], list[str], int | None]:
    scenarios = [_Scenario(f"run x{runs}", tuple(None for _ in range(runs)))]
    skipped: list[str] = []
    reruns = max(1, runs - 1)
    if crashes == "none":
        return scenarios, skipped, None
    if crashes == "random":
        seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        rng = random.Random(seed)
        for i in range(random_scenarios):
            attempts: list[tuple[str, Crash] | None] = []
            names: list[str] = []
            for _ in range(max(1, runs - 1)):
                if rng.random() < 2 / 3 and writers:
                    task = rng.choice(list(writers))
                    point = rng.choice(crash_points(task))
                    crash = Crash(point, rng.randint(1, 2) if point == "during" else 1)
                    attempts.append((task.task_id, crash))
                    names.append(f"{task.task_id} crashes {crash.label()}")
                else:
                    attempts.append(None)
                    names.append("completes")
            attempts.append(None)
            names.append("completes")
            scenarios.append(_Scenario(f"random #{i + 1}: " + ", then ".join(names), tuple(attempts)))
        return scenarios, skipped, seed
    points = (
        list(CRASH_POINTS) if crashes == "all" else [crashes] if isinstance(crashes, str) else list(crashes)
    )
    for point in points:
        if point not in CRASH_POINTS:
            raise HarnessError(
                f"unknown crash point {point!r}: use {', '.join(CRASH_POINTS)}, 'all', 'random' or 'none'"
            )
    for task in writers:
        available = crash_points(task)
        for point in points:
            if point not in available:
                skipped.append(
                    f"{task.task_id}: crash {point} is not available for {type(task).__name__} "
                    "(one atomic SQL statement, or Python code the harness cannot see into)"
                )
                continue
            crash = Crash(point)
            planned: tuple[tuple[str, Crash] | None, ...] = (
                (task.task_id, crash),
                *(None for _ in range(reruns)),
            )
            name = f"{task.task_id}: crash {crash.label()}, then run x{reruns}"
            scenarios.append(_Scenario(name, planned, task.task_id))
    return scenarios, skipped, seed


class _Runner:
    def __init__(
        self,
        tasks: Sequence[Any],
        targets: dict[str, list[str]],
        engine: Engine,
        user_engine: Engine | None,
        start: Any,
        end: Any,
        params: Mapping[str, Any],
        conf: Mapping[str, Any],
        timeout: float,
    ) -> None:
        self.tasks = list(tasks)
        self.targets = targets
        self.engine = engine
        self.user_engine = user_engine
        self.start, self.end = start, end
        self.params, self.conf = params, conf
        self.timeout = timeout

    def attempt(
        self, scenario: str, number: int, crash_at: tuple[str, Crash] | None
    ) -> tuple[list[Attempt], bool]:
        """Run every task once in order; stop at a crash or failure. Returns (attempts, completed)."""
        run_id = f"idempotency__{scenario}__{self.start.isoformat()}"
        xcoms: dict[str, Any] = {}
        out: list[Attempt] = []
        for task in self.tasks:
            crash = crash_at[1] if crash_at is not None and crash_at[0] == task.task_id else None
            context = _context(task, self.start, self.end, run_id, number, xcoms, self.params, self.conf)
            self.engine.dispose()
            if self.user_engine is not None:
                self.user_engine.dispose()  # no pooled connection (or DuckDB file lock) crosses the fork
            result = _run_attempt(task, context, crash, self.timeout)
            if result.status == "ok":
                xcoms[task.task_id] = result.value
                outcome = "completed" if crash is None else "completed (crash point not reached)"
                out.append(Attempt(task.task_id, crash, outcome, "", result.seconds))
                continue
            if result.status == "crashed":
                out.append(Attempt(task.task_id, crash, "crashed", result.error, result.seconds))
            else:
                tail = [line.strip() for line in result.log.strip().splitlines()[-3:]]
                detail = result.error + (" | last log lines: " + " / ".join(tail) if tail else "")
                out.append(Attempt(task.task_id, crash, "failed", detail[:1500], result.seconds))
            return out, False
        return out, True


def check_idempotent(
    subject: Any,
    window: Any,
    *,
    engine: Engine | str | None = None,
    targets: Sequence[str] | Mapping[str, str | Sequence[str]] | None = None,
    keys: Mapping[str, Sequence[str]] | None = None,
    runs: int = 3,
    crashes: str | Sequence[str] = "all",
    seed: int | None = None,
    random_scenarios: int = 3,
    tasks: Sequence[str] | None = None,
    dag_id: str | None = None,
    width: timedelta | None = None,
    params: Mapping[str, Any] | None = None,
    conf: Mapping[str, Any] | None = None,
    reset: Callable[[], None] | None = None,
    restore: bool = True,
    timeout: float = 300.0,
) -> HarnessReport:
    """Run `subject` (a DAG, a task, or a DAG file) for `window` again and again; compare with one clean run.

    :param subject: an Airflow DAG, an operator (task), or the path of a DAG file (with `dag_id`).
    :param window: a day (``"2026-05-01"``, a date), a start datetime (plus `width`, default one day)
        or a ``(start, end)`` pair; handed to the tasks as logical date and data interval.
    :param engine: the warehouse (SQLAlchemy engine or URL) holding the targets; default: the
        Airflow connection of the first task with a ``conn_id``.
    :param targets: the tables to compare. For a task: a list of tables. For a DAG: a mapping
        ``{task_id: table or [tables]}`` for tasks whose targets cannot be found (Python tasks);
        the project's operators declare theirs (``table``), SQL operators' INSERT/MERGE/DELETE/UPDATE
        targets are read from their SQL.
    :param keys: ``{table: [columns]}``: how rows are named in the report (default: primary key,
        unique index, an ``id``/``*_id`` column unique in the clean run, else the whole row).
    :param runs: attempts per scenario (crash scenarios: the crash, then ``runs - 1`` reruns, at least one).
    :param crashes: ``"all"`` (every point each writing task supports), ``"none"``, ``"random"``
        (`random_scenarios` seeded scenarios), or some of ``"before"``, ``"during"``, ``"after_commit"``.
    :param seed: the random scenarios' seed (reported; default: a fresh one).
    :param tasks: in a DAG, the tasks to crash (default: every task with a target).
    :param params: DAG params for the run (over the DAG's defaults); `conf`: the run's conf.
    :param reset: called before the clean run and every scenario instead of restoring the targets'
        snapshot (use it when the tasks also change tables that are not targets).
    :param restore: put the targets back as they were found when done (default True).
    """
    from airflow.sdk import DAG

    if isinstance(subject, str | os.PathLike):
        subject = load_dag(subject, dag_id)
    if isinstance(subject, DAG):
        ordered = list(subject.topological_sort())
        label = subject.dag_id
        declared: Mapping[str, Any] = targets if isinstance(targets, Mapping) else {}
        if targets is not None and not isinstance(targets, Mapping):
            raise HarnessError("for a DAG, give targets as {task_id: [tables]}")
    else:
        if not hasattr(subject, "execute") or not hasattr(subject, "task_id"):
            raise HarnessError(f"{subject!r} is neither a DAG, a task nor a DAG file path")
        ordered = [subject]
        label = subject.task_id
        if isinstance(targets, Mapping):
            declared = targets
        else:
            declared = {subject.task_id: list(targets)} if targets is not None else {}
    if runs < 1:
        raise HarnessError(f"runs must be >= 1 (got {runs})")
    task_targets = {t.task_id: _targets_of(t, declared.get(t.task_id)) for t in ordered}
    task_targets = {k: v for k, v in task_targets.items() if v}
    if not task_targets:
        raise HarnessError(
            f"no target tables found for {label}: declare them, e.g. targets=['my_table'] for a task or "
            "targets={'task_id': ['my_table']} for a DAG"
        )
    writers = [t for t in ordered if t.task_id in task_targets and (tasks is None or t.task_id in tasks)]
    all_tables = list(dict.fromkeys(tbl for tables in task_targets.values() for tbl in tables))
    table_writers = {
        tbl: [tid for tid, tables in task_targets.items() if tbl in tables] for tbl in all_tables
    }

    start, end = _window(window, width)
    user_engine = engine if isinstance(engine, Engine) else None
    own_engine = _engine(engine, ordered)
    scenarios, skipped, used_seed = _plan(ordered, writers, runs, crashes, seed, random_scenarios)
    runner = _Runner(
        ordered, task_targets, own_engine, user_engine, start, end, params or {}, conf or {}, timeout
    )
    initial = {tbl: _snapshot(own_engine, tbl) for tbl in all_tables}

    def reset_state() -> None:
        if reset is not None:
            reset()
        else:
            for snap in initial.values():
                _restore(own_engine, snap)

    try:
        reset_state()
        attempts, completed = runner.attempt("clean", 1, None)
        if not completed:
            failed = attempts[-1]
            raise HarnessError(
                f"the clean run of {label} for window {start.date()} failed in {failed.task_id}: "
                f"{failed.detail}\nfix the task (or the test's setup) first: without one clean run there is "
                "nothing to compare with"
            )
        clean = {tbl: read_table(own_engine, tbl) for tbl in all_tables}
        key_of = {
            tbl: _key_columns(
                own_engine, tbl, (keys or {}).get(tbl) or _declared_key(ordered, tbl), clean[tbl]
            )
            for tbl in all_tables
        }
        results: list[ScenarioResult] = []
        for scenario in scenarios:
            reset_state()
            done: list[Attempt] = []
            for number, crash_at in enumerate(scenario.attempts, start=1):
                made, _ = runner.attempt(_slug(scenario.name), number, crash_at)
                done.extend(made)
            diffs = []
            for tbl in all_tables:
                diff = compare_tables(clean[tbl], read_table(own_engine, tbl), key_of[tbl])
                diff.writers = table_writers[tbl]
                diffs.append(diff)
            note = None
            failures = [a for a in done if a.outcome == "failed"]
            if failures:
                note = f"{len(failures)} attempt(s) failed (not a planned crash): {failures[0].describe()}"
            results.append(ScenarioResult(scenario.name, scenario.crash_task, done, diffs, note))
    finally:
        if restore:
            with contextlib.suppress(Exception):
                for snap in initial.values():
                    _restore(own_engine, snap)
        own_engine.dispose()
    return HarnessReport(
        subject=label,
        window=_label(start, end),
        runs=runs,
        seed=used_seed,
        operators={t.task_id: type(t).__name__ for t in ordered},
        targets=task_targets,
        clean=clean,
        scenarios=results,
        skipped=skipped,
    )


def _declared_key(tasks: Sequence[Any], table: str) -> list[str] | None:
    for task in tasks:
        if getattr(task, "table", None) == table and getattr(task, "key_columns", None):
            return list(task.key_columns)
    return None


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")[:60]


def _label(start: Any, end: Any) -> str:
    if start.time() == end.time() == datetime.min.time() and end - start == timedelta(days=1):
        return start.strftime("%Y-%m-%d")
    return f"[{start.isoformat()}, {end.isoformat()})"


def assert_idempotent(subject: Any, window: Any, **kwargs: Any) -> HarnessReport:
    """check_idempotent, raising NotIdempotentError (an AssertionError with the report) on a failure."""
    report = check_idempotent(subject, window, **kwargs)
    if not report.ok:
        raise NotIdempotentError(report)
    return report


@dataclass
class Harness:
    """Defaults for check_idempotent (the pytest fixture `idempotency` is one of these)."""

    runs: int = 3
    crashes: str | Sequence[str] = "all"
    seed: int | None = None
    random_scenarios: int = 3
    timeout: float = 300.0
    reports: list[HarnessReport] = field(default_factory=list)

    def _kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        for name in ("runs", "crashes", "seed", "random_scenarios", "timeout"):
            kwargs.setdefault(name, getattr(self, name))
        return kwargs

    def check(self, subject: Any, window: Any, **kwargs: Any) -> HarnessReport:
        report = check_idempotent(subject, window, **self._kwargs(kwargs))
        self.reports.append(report)
        return report

    def assert_idempotent(self, subject: Any, window: Any, **kwargs: Any) -> HarnessReport:
        report = self.check(subject, window, **kwargs)
        if not report.ok:
            raise NotIdempotentError(report)
        return report

"""Where the checks put what they find: one `Recorder` per lint run, one `TaskCheck` per task.

A finding's fix defaults to its rule's (`rules.RULES`); a task's findings carry its DAG and task id
and the task's first line as an extra place where an acknowledgement counts. A task gets one finding
per rule and cause (`Recorder.add`'s ``cause``): one per target table, one per kind of clock read,
one per window, however many statements spell it; the first place it is spelled is reported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_idempotent.lint.definitions import DagDef, TaskDef
from airflow_idempotent.lint.facts import TaskFacts, WindowRef
from airflow_idempotent.lint.randomuses import RANDOM_INFO_TAIL, random_use
from airflow_idempotent.lint.report import RuleFinding
from airflow_idempotent.lint.rules import RULES
from airflow_idempotent.lint.schedule import manual_only, start_date_moot
from airflow_idempotent.lint.scope import Workspace
from airflow_idempotent.lint.sinks import clock_destination
from airflow_idempotent.lint.source import Located
from airflow_idempotent.lint.windowsinks import RETURNED, WINDOW_INFO_TAIL, window_destination

__all__ = ["Anchors", "Recorder", "TaskCheck", "without_restated"]

Anchors = tuple[tuple[str, int], ...]
"""Extra (file, line) places where an acknowledgement of a finding counts."""


class Recorder:
    """The findings and per-task notes of one lint run."""

    def __init__(self) -> None:
        self.findings: list[RuleFinding] = []
        #: a rule's condition that holds where a rerun is still safe: listed as information, not failed
        self.information: list[RuleFinding] = []
        self.notes: dict[int, list[str]] = {}
        #: a file's syntax tree by its shown name (set by the linter): where a clock value goes
        self.trees: Callable[[str], ast.Module | None] | None = None
        self._causes: set[tuple[object, ...]] = set()
        #: findings `add` folded into the first of their cause, and each kept finding's cause (`demote`)
        self._folded: dict[tuple[object, ...], list[RuleFinding]] = {}
        self._cause_of: dict[int, tuple[RuleFinding, tuple[object, ...]]] = {}
        #: (file, line) of clock and randomness reads reported that choose no data: an id made of
        #: randomness, a stamp of when a record was written; catch-up (IDEM005) does not count them
        self.picks_no_data: set[tuple[str, int]] = set()
        #: (file, line, dag id, task id) of relative windows whose value only their task returns:
        #: information when no task pulls that XCom (`returnedwindows`, once every task is known)
        self.returned_windows: list[tuple[str, int, str | None, str | None]] = []
        #: (rule, file, line, dag id, task id) of clock reads in a task's own code, plain (IDEM003) or
        #: shifted by a span (IDEM004): judged again once the task's window is known (`severities`)
        self.code_clocks: set[tuple[str, str, int, str | None, str | None]] = set()

    def add(
        self, rule: str, file: str, line: int, message: str, cause: str | None = None, **kwargs: Any
    ) -> None:
        """Record a finding of `rule` (`fix` defaults to the rule's fix); with a `cause`, only the first
        finding of that rule and cause for the same task (or DAG, or file: module-level code of two
        files is two owners) is kept."""
        fix = kwargs.pop("fix", None) or RULES[rule].fix
        found = RuleFinding(rule, file, line, message, fix, **kwargs)
        if cause is not None:
            dag_id, task_id = kwargs.get("dag_id"), kwargs.get("task_id")
            alone = file if dag_id is None and task_id is None else None
            owner = (dag_id, task_id, kwargs.get("anchors", ()), alone)
            key = (*owner, rule, cause)
            if key in self._causes:
                self._folded.setdefault(key, []).append(found)
                return
            self._causes.add(key)
            self._cause_of[id(found)] = (found, key)
        self.findings.append(found)

    def demote(self, found: RuleFinding, message: str | None) -> RuleFinding | None:
        """Make a recorded finding information (`message` says why a rerun is safe; None: drop it, as
        `add` folds a second finding of a cause). The next finding of its cause that `add` folded into
        it, if any, is reported in its place and returned, to be judged in turn (a second window of the
        task is not hidden by the first one's demotion)."""
        self.findings.remove(found)
        if message is not None:
            self.info(
                found.rule,
                found.file,
                found.line,
                message,
                dag_id=found.dag_id,
                task_id=found.task_id,
                anchors=found.anchors,
            )
        kept = self._cause_of.pop(id(found), None)
        key = kept[1] if kept is not None and kept[0] is found else None
        waiting = self._folded.get(key, []) if key is not None else []
        if key is None or not waiting:
            return None
        following = waiting.pop(0)
        self._cause_of[id(following)] = (following, key)
        self.findings.append(following)
        return following

    def info(self, rule: str, file: str, line: int, message: str, **kwargs: Any) -> None:
        """Record information: `rule`'s condition holds, but the rerun is safe here (the message
        says why); one per rule, place and message."""
        kwargs.pop("cause", None)
        kwargs.pop("fix", None)
        found = RuleFinding(rule, file, line, message, "nothing: a rerun is safe here", **kwargs)
        if not any(
            (i.rule, i.file, i.line, i.message, i.task_id) == (rule, file, line, message, found.task_id)
            for i in self.information
        ):
            self.information.append(found)

    def note(self, task: TaskDef, note: str) -> None:
        """Something the linter could not read about `task` (listed with its answers, not failed)."""
        self.notes.setdefault(id(task), []).append(note)

    def clock_read(
        self,
        owner: TaskDef | DagDef | None,
        name: str,
        place: tuple[str, int],
        anchors: Anchors,
        where: str,
        relative: bool,
        start_date: bool = False,
        through: str | None = None,
    ) -> WindowRef:
        """A clock (or randomness) read in Python, a template or a shell: IDEM004 when shifted by a
        span ("the last N hours"), else IDEM003; a clock-based ``start_date`` is IDEM003 (it moves the
        schedule, it is no data window). Returns what it says about the window.

        `through`: the repository function the clock is read in, when the read is a call of it
        (``register_dag(daily_scan_dag(..))``). Principle: each such function is its own cause of an
        IDEM003, so the calls of two DAG factories in one file (LREN-CHUV's continuous and daily
        scanners) are two findings, never one hiding the other; the clock read twice in one owner
        stays one, and a window ("the last N", IDEM004) stays one per owner however many helpers
        spell it (the helper's own read and its call are one window)."""
        task = owner if isinstance(owner, TaskDef) else None
        file, line = place
        # whose finding or note it is: the same for every outcome below
        owned: dict[str, Any] = {
            "dag_id": owner.dag_id if owner is not None else None,
            "task_id": task.task_id if task is not None else None,
            "anchors": anchors,
        }
        randomness = name.split(".")[0].rstrip("()") in ("random", "uuid", "secrets", "os")
        kind = "randomness" if randomness or name.startswith("uuid") else "the clock"
        cause = "window" if relative and not start_date else kind
        if through is not None and cause != "window":
            cause = f"{cause} in {through}()"
        dag = owner if isinstance(owner, DagDef) else (owner.dag if isinstance(owner, TaskDef) else None)
        moot = start_date_moot(dag, name) if start_date and dag is not None else None
        if moot is not None:
            self.info(
                "IDEM003",
                file,
                line,
                f"start_date moves with the clock ({name} in {where}), but {moot}",
                **owned,
            )
            return WindowRef("param", f"The clock: {name} in {where} decides the start_date.")
        if relative and not start_date and dag is not None and manual_only(dag):
            self.info(
                "IDEM004",
                file,
                line,
                f'the window is "the last N" before {name} in {where}, but the DAG runs only when '
                "triggered (schedule=None): no scheduled window is missed, and each run is started for "
                "the span it reads",
                **owned,
            )
            return WindowRef("relative", f'The clock: "the last N" before {name} in {where} (run by hand).')
        if start_date:
            rule = "IDEM003"
            message = (
                f"start_date moves with the clock ({name} in {where}): the DAG's first window and what "
                "catchup creates depend on when the file is parsed, and a run triggered for an earlier "
                "date gets no task instances (Airflow creates only tasks whose start_date is on or before "
                "the run's logical date, backfills aside)"
            )
            ref = WindowRef("param", f"The clock: {name} in {where} decides the start_date.")
        elif relative:
            tree = self.trees(file) if self.trees is not None else None
            why = window_destination(tree, line)
            if why == RETURNED:  # an XCom: data only if a task pulls it, asked once all are known
                if task is not None and _in_callable(task, file, line):
                    self.returned_windows.append((file, line, task.dag_id, task.task_id))
                why = None
            if why is not None:  # round 36d (lint57): a window whose value reaches no data
                self.picks_no_data.add((file, line))
                ids = {"dag_id": dag.dag_id if dag is not None else None, "anchors": anchors}
                text = f'the window is "the last N" before {name} in {where}, but {why}; {WINDOW_INFO_TAIL}'
                self.info("IDEM004", file, line, text, task_id=task.task_id if task else None, **ids)
                return WindowRef(
                    "relative", f'The clock: "the last N" before {name} in {where}, reaching no data.', False
                )
            rule = "IDEM004"
            message = (
                f'the window is "the last N" before now: {name} shifted by a fixed span in {where}; a rerun '
                "a day late reads a different span, and the missed one is never loaded"
            )
            ref = WindowRef("relative", f'The clock: "the last N" before {name} in {where}.')
        else:
            rule = "IDEM003"
            message = (
                f"{name} in {where} reads {kind}: a rerun of the same run gets a different value than the "
                "first run did"
            )
            ref = WindowRef("clock", f"The clock: {name} in {where} (line {line}).", kind == "the clock")
            if kind == "randomness":
                self.picks_no_data.add((file, line))
            tree = self.trees(file) if self.trees is not None else None
            if kind == "randomness" and (used := random_use(tree, line)) is not None:
                # round 36e (lint60): a random value used whole names nothing a rerun writes
                self.info(
                    "IDEM003",
                    file,
                    line,
                    f"{name} in {where} reads randomness, but {used}: {RANDOM_INFO_TAIL}",
                    **owned,
                )
                return WindowRef("clock", f"The clock: {name} in {where} (line {line}).", False)
            why = clock_destination(tree, line) if tree is not None and kind == "the clock" else None
            if why is not None:  # IDEM003's severity (issue 35, lint46): the value only stamps or logs
                self.picks_no_data.add((file, line))
                self.info(
                    "IDEM003",
                    file,
                    line,
                    f"{name} in {where} reads the clock, but {why}: a rerun reads and writes the same "
                    "data, only stamped or logged at another time",
                    **owned,
                )
                return WindowRef("clock", f"The clock: {name} in {where} (line {line}), a stamp only.", False)
        if where == "its code" and task is not None and (rule == "IDEM004" or kind == "the clock"):
            self.code_clocks.add((rule, file, line, task.dag_id, task.task_id))
        self.add(
            rule,
            file,
            line,
            message,
            cause=cause,
            **owned,
        )
        return ref


def _in_callable(task: TaskDef, file: str, line: int) -> bool:
    """`line` of `file` is in one of the task's own callables (whose return value is its XCom)."""
    return any(
        task.homes.get(id(fn), task.scope).source.display == file
        and fn.lineno <= line <= (fn.end_lineno or fn.lineno)
        for fn in task.functions
        if not isinstance(fn, ast.Lambda)
    )


@dataclass
class TaskCheck:
    """One task being checked: the task, what is learnt about it, and where its findings go."""

    task: TaskDef
    facts: TaskFacts
    recorder: Recorder
    workspace: Workspace
    dialect: str | None
    conn: str | None
    #: the value of a mapped argument being checked (``.expand(sql=[...])``: each item runs alone)
    unit: int = 0

    @property
    def anchors(self) -> Anchors:
        """The task's first line: an acknowledgement there (or on the line above) covers its findings."""
        return ((self.task.scope.source.display, self.task.line),)

    @property
    def file(self) -> str:
        """The file the task is written in, as reports show it."""
        return self.task.scope.source.display

    def add(self, rule: str, file: str, line: int, message: str, **kwargs: Any) -> None:
        """Record a finding of this task."""
        kwargs.setdefault("anchors", self.anchors)
        self.recorder.add(
            rule, file, line, message, dag_id=self.task.dag_id, task_id=self.task.task_id, **kwargs
        )

    def info(self, rule: str, file: str, line: int, message: str) -> None:
        """Information about this task: `rule`'s condition holds, but its rerun is safe here."""
        self.recorder.info(
            rule,
            file,
            line,
            message,
            dag_id=self.task.dag_id,
            task_id=self.task.task_id,
            anchors=self.anchors,
        )

    def note(self, note: str) -> None:
        """Something the linter could not read about this task."""
        self.recorder.note(self.task, note)

    def clock_read(self, name: str, place: tuple[str, int], where: str, relative: bool) -> None:
        """A clock read in the task's code, templates or shell command (see `Recorder.clock_read`)."""
        self.facts.windows.append(
            self.recorder.clock_read(self.task, name, place, self.anchors, where, relative)
        )

    def place(self, located: Located, offset: int | None) -> tuple[str, int]:
        """(file, line) of an offset of a located text the task runs."""
        return located.place(offset)


#: rules whose finding restates a relative window's clock read: the read is one cause (IDEM004)
_RESTATES_WINDOW = frozenset({"IDEM001", "IDEM003"})


def without_restated(findings: list[RuleFinding]) -> list[RuleFinding]:
    """Findings less those that restate an IDEM004 window of the same task: an IDEM003 (or IDEM001)
    for a clock read on the window's own line or the next or previous one (``start = now() -
    timedelta(..)`` is one cause, a relative window, not also "a clock read")."""
    windows = {(f.file, f.dag_id, f.task_id, f.line) for f in findings if f.rule == "IDEM004"}

    def restates(f: RuleFinding) -> bool:
        return f.rule in _RESTATES_WINDOW and any(
            (f.file, f.dag_id, f.task_id, f.line + d) in windows for d in (-1, 0, 1)
        )

    return [f for f in findings if not restates(f)]

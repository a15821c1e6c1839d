"""Severity by shape (issue 35, round 36k): a finding true of the code whose shape says the rerun is
safe is listed as information, decided once every task of a run is checked.

Evidence: the labels of rounds 28-48 (docs/lint-evaluation.md, "Round 36k"), where plain clock reads
in task code were 162 sites, 3 useful.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_idempotent.lint.facts import CONTEXT_FETCH, SUBSCRIPT_TEXT, WindowRef
from airflow_idempotent.lint.findings import Recorder, TaskCheck
from airflow_idempotent.lint.report import RuleFinding

__all__ = ["check_severities"]

#: the information's tail: what the clock value is, and when it would matter
_BESIDE_TAIL = (
    "the task takes the run's window too, so what it reads is the run's; the clock value only "
    "stamps, names or times what the run writes (it matters only if it picks the rows or the window "
    "a write takes)"
)


def check_severities(checks: Sequence[TaskCheck], recorder: Recorder) -> None:
    """Each rule of this module over the findings of every checked task."""
    for check in checks:
        _clock_beside_run_window(check, recorder)


def _clock_beside_run_window(check: TaskCheck, recorder: Recorder) -> None:
    """A clock read in a task's own code (IDEM003, or IDEM004 shifted by a span) of a task that also
    takes the run's window (its data interval or logical date in its templates or code): the run
    fixes the data the task reads, and the clock value beside it stamps a row, names a file or a log
    folder, times a step or dates a report. On rounds 28-48 such reads were harmless (round 36k's
    table); a task that takes no window of the run, where the clock read is the window, stays a
    finding."""
    if not any(_named_run_window(w) for w in check.facts.windows):
        return
    owner = (check.task.dag_id, check.task.task_id)
    for found in [f for f in recorder.findings if (f.dag_id, f.task_id) == owner]:
        current: RuleFinding | None = found
        while current is not None and _code_clock(current, recorder):
            head = current.message.split(":", 1)[0]
            current = recorder.demote(current, f"{head}, but {_BESIDE_TAIL}")


def _named_run_window(window: WindowRef) -> bool:
    """The run's window named by a template or a context parameter (as `catchups` reads it), not only
    a subscript (``row["ts"]`` reads a row's field as often as the context's ``ts``)."""
    return (
        window.kind == "run" and window.text != CONTEXT_FETCH and not window.text.startswith(SUBSCRIPT_TEXT)
    )


def _code_clock(found: RuleFinding, recorder: Recorder) -> bool:
    return (found.rule, found.file, found.line, found.dag_id, found.task_id) in recorder.code_clocks

"""IDEM004 on a rolling reprocessing window is information (issue 35, round 34b).

Round 34's batch raised 57 harmless IDEM004 findings of one shape: every run of a ``catchup=False``
DAG recomputes "the last N days" before the clock (``START_DATE = now() - timedelta(days=int(
Variable.get("LOOKBACK_DAYS")))`` handed to a Databricks job whose cluster overwrites partitions
dynamically; ``DELETE .. WHERE d >= NOW() - INTERVAL 90 DAY`` before a reload; a 7-day pull upserted by
key). N spans several of the DAG's periods, so each period is rewritten by several runs: a late run, a
cleared one or a missed one loses nothing, the next runs cover it again. The window is relative to the
clock (the condition holds), but a rerun is safe.

A finding becomes information when all of these hold, read from the syntax:

- the clock is the window's lower bound (``>=``/``>``/``BETWEEN .. AND now()`` in SQL; a value named as
  a start in Python: ``START_DATE=``, ``fromDate``, ``windowStartDate``, ``since``), so the window runs
  up to the run's moment; a single day N days back (``d = CURRENT_DATE - 3``) is no rolling window;
- its width (the shift, less the shift of an upper bound of the same statement) spans three of the
  DAG's schedule periods or more (`schedule.Schedule.period`: ``INTERVAL 90 DAY`` on a daily DAG, one
  day on an hourly one; two periods, the corpus's rel03 hour synced every 30 minutes, stay a finding:
  a run late by more than one period loses data), or its count is read from an Airflow ``Variable``
  (a lookback the deployment sets) in a unit no shorter than the period; an unknown schedule keeps
  the finding. A date clock shifted by whole days (``CURRENT_DATE - 2``) starts at a midnight and
  counts the run's own day too (three days: round 36j, `windowspans`);
- the DAG runs with catchup off: ``catchup=False``, or every task after a ``LatestOnlyOperator``
  (`latestonly`);
- what the task writes replaces rather than appends: every write is an overwrite, upsert, merge,
  replace or update (the task's own delete of the window makes its insert an overwrite,
  `checks.task_findings`); a task that only deletes the window, reloaded by another task of the DAG;
  or, when the linter reads no write, an argument that says so (``partitionOverwriteMode: dynamic``
  in a Spark cluster's configuration, ``duplicate_handling='REPLACE'``, a write mode ``overwrite``)
  and none that says append.

A window computed in module-level code is judged by the tasks that take its value (through the
module's names and functions): every one of them must pass. Kept as findings: a window of one period
(an hourly "last hour" with catchup off: a late run loses the hour), a write that appends or that the
linter cannot see, and a DAG whose schedule it cannot read.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator

from airflow_idempotent.lint.definitions import DagDef, TaskDef
from airflow_idempotent.lint.facts import same_table
from airflow_idempotent.lint.findings import Recorder, TaskCheck
from airflow_idempotent.lint.latestonly import latest_only_gate
from airflow_idempotent.lint.report import RuleFinding
from airflow_idempotent.lint.schedule import dag_schedule
from airflow_idempotent.lint.scope import Workspace
from airflow_idempotent.lint.source import shown
from airflow_idempotent.lint.windowspans import Window, python_window, sql_window

__all__ = ["catchup_off", "check_rolling_windows", "declared_mode"]

#: writes that replace what they write: a rerun writes the same rows again, adds none
_REPLACING = frozenset({"overwrite", "upsert", "merge", "replace", "dedup", "update", "keyed-insert"})
_CLEARING = frozenset({"delete", "truncate", "drop"})
_MODE_KEY = re.compile(
    r"(?i)(write_?mode|save_?mode|^mode|write_disposition|if_exists|duplicate_handling|load_?mode)$"
)
_MODE_REPLACES = frozenset({"overwrite", "replace", "write_truncate", "upsert", "merge", "truncate"})
_MODE_APPENDS = frozenset({"append", "insert", "insert-only", "insert_only", "write_append"})
_PARTITION_MODE = "partitionoverwritemode"
_RESTATES = frozenset({"IDEM001", "IDEM003"})


def catchup_off(dag: DagDef) -> str | None:
    """Why the DAG creates no backlog of runs: ``catchup=False``, or a ``LatestOnlyOperator`` that every
    task runs after (the caught-up runs do nothing); None otherwise (the deployment's default too)."""
    node = dag.kwargs.get("catchup")
    if node is not None and dag.scope.literal(node) is False:
        return "catchup=False"
    gate = latest_only_gate(dag)
    if gate is not None:
        return f"every task after {gate} (a LatestOnlyOperator: caught-up runs do nothing)"
    return None


def _pairs(node: ast.AST | None, task: TaskDef, depth: int = 0) -> Iterator[tuple[str, str]]:
    """(key, string value) pairs of an argument: keywords and dict items, through the module's names."""
    if node is None or depth > 5:
        return
    value, scope = task.scope.value(node) if isinstance(node, ast.expr) else (node, task.scope)
    if value is None:
        return
    for sub in ast.walk(value):
        items: list[tuple[str | None, ast.expr]] = []
        if isinstance(sub, ast.Dict):
            items = [
                (scope.literal(k) if k is not None else None, v)
                for k, v in zip(sub.keys, sub.values, strict=False)
            ]
        elif isinstance(sub, ast.Call):
            items = [(k.arg, k.value) for k in sub.keywords]
        for key, item in items:
            literal = scope.literal(item)
            if isinstance(key, str) and isinstance(literal, str):
                yield key, literal
            elif isinstance(item, ast.Name):
                yield from _pairs(item, task, depth + 1)


def declared_mode(task: TaskDef) -> str | None:
    """An argument that says the task's write replaces (``partitionOverwriteMode: dynamic`` in a Spark
    conf, ``duplicate_handling='REPLACE'``, a write mode ``overwrite``), when none says it appends."""
    pairs = [(k, v) for node in task.kwargs.values() for k, v in _pairs(node, task)]
    pairs += [(k, v) for k, node in task.kwargs.items() if isinstance(v := task.scope.literal(node), str)]
    if any(_MODE_KEY.search(k.rsplit(".", 1)[-1]) and v.lower() in _MODE_APPENDS for k, v in pairs):
        return None
    for key, value in pairs:
        if key.rsplit(".", 1)[-1].lower() == _PARTITION_MODE and value.lower() == "dynamic":
            return f"its Spark cluster overwrites the partitions it writes ({key}: {value})"
    for key, value in pairs:
        if _MODE_KEY.search(key.rsplit(".", 1)[-1]) and value.lower() in _MODE_REPLACES:
            return f"its write replaces what it writes ({key}={value!r})"
    return None


def _names_table(task: TaskDef, table: str) -> bool:
    return any(
        isinstance(v := task.scope.literal(n), str) and same_table(v.lower(), table.lower())
        for node in task.kwargs.values()
        for n in ast.walk(node)
        if isinstance(n, ast.Constant)
    )


def _delete_only(check: TaskCheck) -> bool:
    writes = [w for w in check.facts.writes if w.how != "create"]
    return bool(writes) and all(w.how in _CLEARING for w in writes)


def _replaces(check: TaskCheck, others: list[TaskCheck], kept_window: Callable[[], str | None]) -> str | None:
    """Why what the task writes replaces rather than appends, or None. A task that only deletes the
    window is the delete half of a delete-and-reload when another task of the DAG writes (or names)
    the table, and no task of the DAG keeps a window that is a finding (`kept_window`: the reload of a
    window that is a defect is no safe reload; tuning's Newton-School ``delete_table``)."""
    writes = [w for w in check.facts.writes if w.how != "create"]
    kept = [w for w in writes if w.how not in _CLEARING]
    if kept:
        if all(w.how in _REPLACING for w in kept):
            tables = ", ".join(sorted({shown(w.table) for w in kept}))
            hows = "/".join(sorted({w.how for w in kept}))
            return f"it writes {tables} by {hows}"
        return None
    if writes:  # only deletes: the delete half of a delete-and-reload
        for write in writes:
            reloader = next(
                (
                    o.task.task_id
                    for o in others
                    if o is not check
                    and o.task.dag is check.task.dag
                    and (
                        any(
                            same_table(w.table, write.table) and w.how not in _CLEARING
                            for w in o.facts.writes
                        )
                        or _names_table(o.task, write.table)
                    )
                ),
                None,
            )
            if reloader is None:
                return None
        if kept_window() is not None:
            return None
        return f"it deletes the window of {shown(writes[0].table)}, which {reloader} reloads"
    return declared_mode(check.task)


def _mentions(node: ast.AST | None, names: set[str]) -> bool:
    return node is not None and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _tainted(tree: ast.Module, line: int) -> set[str]:
    """Module-level names (and functions) whose value comes from the statement at `line`."""
    start = next(
        (
            s
            for s in ast.walk(tree)
            if isinstance(s, ast.Assign | ast.AnnAssign) and s.lineno <= line <= (s.end_lineno or s.lineno)
        ),
        None,
    )
    if start is None:
        return set()
    names = {
        t.id
        for t in (start.targets if isinstance(start, ast.Assign) else [start.target])
        if isinstance(t, ast.Name)
    }
    for _ in range(10):
        grown = set(names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and _mentions(node.value, names):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                grown |= {t.id for t in targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _mentions(node, names):
                grown.add(node.name)
        if grown == names:
            break
        names = grown
    return names


def _takers(found: RuleFinding, checks: list[TaskCheck], workspace: Workspace) -> list[TaskCheck] | None:
    """The tasks a finding's window reaches: its own task, or (module-level code) every task of the
    file whose arguments name a value computed from it (none: no task takes it); None when the
    linter cannot tell."""
    if found.task_id is not None:
        own = [
            c
            for c in checks
            if (c.task.dag_id, c.task.task_id) == (found.dag_id, found.task_id) and c.anchors == found.anchors
        ]
        return own[:1] or None
    src = next((s for s in workspace.sources.values() if s.display == found.file), None)
    scope = workspace.scope(src.path) if src is not None else None
    names = _tainted(scope.tree, found.line) if scope is not None else set()
    if scope is None or not names:
        return None
    takers = [
        c
        for c in checks
        if c.task.scope.source is scope.source
        and any(
            isinstance(n, ast.Name) and n.id in names for v in c.task.kwargs.values() for n in ast.walk(v)
        )
    ]
    return takers


def _window(found: RuleFinding, workspace: Workspace) -> Window | None:
    src = next((s for s in workspace.sources.values() if s.display == found.file), None)
    if src is None:
        return None
    scope = workspace.scope(src.path) if src.path.suffix == ".py" else None
    window = python_window(scope.tree, scope, found.line) if scope is not None else None
    return window if window is not None else sql_window(src.lines, found.line)


def _rolling(
    found: RuleFinding, checks: list[TaskCheck], workspace: Workspace, recorder: Recorder
) -> str | None:
    """Why a window finding is a rolling reprocessing window (the information's reason), or None."""
    window = _window(found, workspace)
    takers = _takers(found, checks, workspace) if window is not None else None
    if window is None or not takers:
        return None
    reasons: list[str] = []
    for check in takers:
        dag = check.task.dag
        schedule = dag_schedule(dag) if dag is not None else None
        period = schedule.period if schedule is not None else None
        off = catchup_off(dag) if dag is not None else None
        if schedule is None or period is None or off is None or not window.spans_more_than(period):
            return None
        writes = _replaces(check, checks, functools.partial(_kept_window, check, checks, workspace, recorder))
        if writes is None:
            return None
        reasons.append(f"{check.task.task_id}: {writes}")
        head = f"{window.text()} spans several {schedule.shown} periods, the DAG runs with {off}"
    return (
        f'the window is "the last N" before the clock, but it is a rolling reprocessing window: {head}, '
        f"and what it loads replaces ({'; '.join(reasons)}): each period is rewritten by several runs, "
        "so a late, cleared or missed run loses nothing"
    )


def _kept_window(
    check: TaskCheck, checks: list[TaskCheck], workspace: Workspace, recorder: Recorder
) -> str | None:
    """Another task of the check's DAG (not a delete-only one) whose IDEM004 window stays a finding."""
    for found in list(recorder.findings):
        if found.rule != "IDEM004" or found.dag_id != check.task.dag_id:
            continue
        if found.task_id is None or found.task_id == check.task.task_id:
            continue
        own = _takers(found, checks, workspace)
        if own and _delete_only(own[0]):
            continue
        if _rolling(found, checks, workspace, recorder) is None:
            return found.task_id
    return None


def check_rolling_windows(checks: list[TaskCheck], recorder: Recorder, workspace: Workspace) -> None:
    """Each IDEM004 window relative to the clock that is a rolling reprocessing window becomes
    information. A window `Recorder.add` folded into it (the same task's or module's) is then judged
    in its place: reported if it is not rolling, folded again (no second entry) if it is, or if no
    task takes its value (before, it was folded too)."""
    for first in [f for f in recorder.findings if f.rule == "IDEM004"]:
        found: RuleFinding | None = first
        while found is not None:
            why = _rolling(found, checks, workspace, recorder)
            unused = found is not first and _takers(found, checks, workspace) == []
            if why is None and not unused:
                break
            for restating in [  # a clock read the window spells (`findings.without_restated` drops it)
                f
                for f in recorder.findings
                if found is first
                and f.rule in _RESTATES
                and (f.file, f.dag_id, f.task_id) == (found.file, found.dag_id, found.task_id)
                and abs(f.line - found.line) <= 1
            ]:
                recorder.findings.remove(restating)
            found = recorder.demote(found, why if found is first else None)

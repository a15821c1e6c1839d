"""IDEM005, unbounded catchup: a DAG whose unpause creates every window since its start_date.

The rule is for a backlog that writes the wrong data. Catchup is on when the DAG says
``catchup=True`` or leaves it to the deployment's default (on in Airflow 2, and wherever
``catchup_by_default`` is on). When the DAG's tasks take the run's window (a template or context name
of its data interval, or this package's window operators) and none reads the clock, a relative window
or a saved mark, each caught-up run writes its own window: the backlog is listed as information (its
size, and ``max_active_runs`` / ``end_date`` when not set), not failed, whether catchup was asked for
or inherited (round 36b: every useful implicit-catchup label of rounds 1-36 is a DAG whose tasks take
no window or read the clock; Geoscience Australia's reporting pods handed ``{{ ds }}`` and their data
interval were 27 harmless findings). Catchup over tasks that read the clock or take no window stays a
finding: every caught-up run then writes the same, current data under another window. The tasks are
only known once every task of the repository is checked (watermarks are decided across tasks), so
catchup is decided in `decide_catchups`, after `Linter.finish`'s task checks. ``max_active_runs=1``
exempts only an explicit ``catchup=True`` (a backfill asked for and throttled): an implicit catchup run
one window at a time is still a backlog nobody asked for, growing without bound (round 19: Mozilla's
``experiments_live``, every 5 minutes since 2021, a finding when its tasks take no window).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from airflow_idempotent.lint.configfiles import config_file
from airflow_idempotent.lint.definitions import DagDef
from airflow_idempotent.lint.deployment import CatchupDefault
from airflow_idempotent.lint.envchoices import choices, is_none
from airflow_idempotent.lint.facts import CONTEXT_FETCH
from airflow_idempotent.lint.findings import Recorder, TaskCheck
from airflow_idempotent.lint.latestonly import latest_only_gate
from airflow_idempotent.lint.schedule import clock_start_read, dag_schedule, static_date
from airflow_idempotent.lint.widths import EFFECT_OPERATORS, is_package_operator

__all__ = ["PendingCatchup", "check_catchup", "decide_catchups"]

#: Rules whose findings mean a task's data comes from the clock, a span before it, or a saved mark.
_CLOCK_RULES = frozenset({"IDEM001", "IDEM003", "IDEM004"})
#: Window kinds (`facts.WindowRef.kind`) that are not the run's own window.
_NOT_RUN = frozenset({"clock", "relative", "target"})
#: How a finding's backlog ends: all at once, or (an implicit catchup with max_active_runs=1, nobody
#: asked for it) one run at a time, still without bound.
_UNBOUNDED = ", all queued at once, and the number grows without bound"
_THROTTLED = (
    "; max_active_runs=1 throttles it to one run at a time but does not bound it (nobody asked for it: "
    "set catchup=False, or an end_date=)"
)


@dataclass
class PendingCatchup:
    """A catchup backlog, judged once the DAG's tasks are checked."""

    dag: DagDef
    line: int
    what: str  # "every @daily window since 2020-01-01 (2,190 so far, ..)"
    checks: list[TaskCheck]
    #: no ``catchup=``: the deployment's default ("no catchup= and the deployment's default is on (..)")
    inherited: str | None = None
    #: how an inherited backlog ends (`_UNBOUNDED`, or `_THROTTLED` under max_active_runs=1)
    tail: str = _UNBOUNDED


def check_catchup(
    dag: DagDef, recorder: Recorder, default: CatchupDefault | None = None
) -> PendingCatchup | None:
    """IDEM005: catchup on with no end_date on a time-based schedule (an explicit one with runs not
    limited to one); a DAG without ``catchup=`` takes the deployment's `default`; none known, a DAG
    that spells ``schedule_interval=`` (removed in Airflow 3) runs on Airflow 2, whose default is on;
    else not judged. The backlog is returned, to be decided by its tasks (`decide_catchups`)."""
    node = dag.kwargs.get("catchup")
    if node is None and default is None and "schedule_interval" in dag.kwargs:
        default = CatchupDefault(True, "Airflow 2's: the DAG spells schedule_interval=, gone in Airflow 3")
    catchup = dag.scope.literal(node) if node is not None else (default.on if default else None)
    if catchup is not True:
        return None
    end = dag.kwargs.get("end_date") or dag.default_args.get("end_date")
    if end is not None and not all(is_none(choice) for choice in choices(dag.scope, end)):
        return None  # ``end_date=set_env_value(production=None, dev=None)``: none (round 35b)
    one_at_a_time = dag.scope.literal(dag.kwargs.get("max_active_runs")) == 1
    if one_at_a_time and node is not None:
        return None  # chosen, one window at a time: a deliberate, throttled backfill
    schedule = dag_schedule(dag)
    if schedule is None:
        return None  # no time-based schedule: catchup has no windows to create
    start_node = dag.kwargs.get("start_date") or dag.default_args.get("start_date")
    start = static_date(dag.scope, start_node)
    own = node is not None and "catchup" not in dag.inherited  # not a DAG factory's default
    loaded = config_file(node)  # ``DAG(**CFG["dag"])`` of a YAML/JSON file (round 36f)
    line = node.lineno if own and node is not None and loaded is None else dag.line
    read = clock_start_read(dag) if start is None else None
    moving = read[0] if read is not None else None
    if read is not None and read[1].source is not dag.scope.source:
        # written in another module (``from common import default_args``): the moving start is
        # reported there, once for the module, whether or not that module holds DAG code
        recorder.clock_read(
            None,
            read[0],
            (read[1].source.display, read[2].lineno),
            (),
            "module-level code",
            False,
            start_date=True,
        )
    if moving is not None:
        recorder.info(
            "IDEM005",
            dag.file,
            line,
            f"catchup is on with no end_date, but the start_date moves with the clock ({moving}): "
            "catchup creates at most the few windows between that start and the parse, never a "
            "backlog that grows (the moving start is reported on its own, IDEM003)",
            dag_id=dag.dag_id,
        )
        return None
    if start is not None:
        count = ""
        if schedule.period is not None:
            today = datetime.now(timezone.utc).date()  # the linter's own clock, for the count only
            windows = max(0, int((today - start) / schedule.period))
            count = f" ({windows:,} so far, growing by one every period)"
        what = f"every {schedule.shown} window since {start.isoformat()}{count}"
    elif start_node is not None:
        unreadable = ast.unparse(start_node)
        what = f"every {schedule.shown} window since a start_date the linter cannot read ({unreadable})"
    else:
        what = f"every {schedule.shown} window since its start_date"
    source = default.source if default else ""
    setting = (
        "catchup=True" if node is not None else f"no catchup= and the deployment's default is on ({source})"
    )
    if loaded is not None:
        setting += f" (in {Path(loaded).name}, the configuration file the DAG is built from)"
    if node is None and "catchup" in dag.default_args:  # round 36f: Airflow reads it only from the DAG
        setting += (
            "; the catchup in its default_args is ignored: Airflow takes catchup only as a DAG argument"
        )
    gate = latest_only_gate(dag)
    if gate is not None:  # round 34b (issue 35): caught-up runs skip all their work
        recorder.info(
            "IDEM005",
            dag.file,
            line,
            f"{setting} and no end_date: the scheduler creates {what}, but every task runs downstream "
            f"of {gate} (a LatestOnlyOperator at the root): the caught-up runs skip all their work, and "
            "only the latest run does it",
            dag_id=dag.dag_id,
        )
        return None
    if node is not None:
        return PendingCatchup(dag, line, what, [])
    return PendingCatchup(dag, line, what, [], setting, _THROTTLED if one_at_a_time else _UNBOUNDED)


def _finding(
    recorder: Recorder,
    dag: DagDef,
    line: int,
    setting: str,
    what: str,
    tail: str = _UNBOUNDED,
) -> None:
    recorder.add(
        "IDEM005",
        dag.file,
        line,
        f"{setting} and no end_date: when the DAG is unpaused the scheduler creates {what}{tail}",
        cause="catchup",
        dag_id=dag.dag_id,
        anchors=((dag.file, dag.line),),
    )


def _takes_run_window(check: TaskCheck) -> bool:
    """A name of the run's window in its templates or code, or this package's window operators (a
    bare ``get_current_context()`` is not enough: a Slack message fetches it for the DAG's id)."""
    return (
        any(w.kind == "run" and w.text != CONTEXT_FETCH for w in check.facts.windows)
        or check.facts.project is not None
        or is_package_operator(check.task)
        or is_package_operator(check.task, EFFECT_OPERATORS)
    )


#: operators that move no data: a caught-up run of them writes nothing
_IDLE = frozenset({"EmptyOperator", "DummyOperator"})


def _fed_or_idle(check: TaskCheck) -> bool:
    """A task that takes no window itself but reads another task's XCom (the window that task
    took: dea's collectors pulling the inventory file of the dated download), or moves no data (an
    empty operator, a sensor)."""
    operator = check.task.operator.rsplit(".", 1)[-1]
    return (
        any(use.kind == "xcom" for use in check.facts.state_reads)
        or bool(check.task.inputs)
        or any(  # ``ti.xcom_pull(task_ids=name)`` in its code, the ids in a variable
            isinstance(node, ast.Attribute) and node.attr == "xcom_pull"
            for fn in check.task.functions
            for node in ast.walk(fn)
        )
        or operator in _IDLE
        or operator.endswith("Sensor")
    )


def _clock_tasks(pending: PendingCatchup, recorder: Recorder) -> list[str]:
    """The DAG's tasks whose data comes from the clock, a relative window or a saved mark (and the
    DAG file's module-level clock reads), by name.

    Principle (round 33): only reads that choose the data count. A clock value only written as a
    stamp (``updated_at = now()``) or randomness made into ids leaves each caught-up run writing its
    own window; a timer (``now() - started > timeout``) is no finding at all (`pyfacts`)."""
    tasks = {(c.task.dag_id, c.task.task_id) for c in pending.checks}
    named = {
        f.task_id or "module-level code"
        for f in recorder.findings
        if f.rule in _CLOCK_RULES
        and (f.file, f.line) not in recorder.picks_no_data
        and ((f.dag_id, f.task_id) in tasks or (f.task_id is None and f.file == pending.dag.file))
    }
    named.update(
        c.task.task_id
        for c in pending.checks
        if any(w.kind in _NOT_RUN and w.picks_data for w in c.facts.windows)
    )
    return sorted(named)


def decide_catchups(pending: list[PendingCatchup], recorder: Recorder) -> None:
    """Each catchup backlog: information when the DAG's tasks take the run's window and none reads
    the clock; else IDEM005. Asked for, one task taking the window is enough (the others follow it);
    left to the default, every task must take it, read another task's XCom or move no data (round
    36b: Mozilla's probe scraper, whose two expiry-alert tasks take ``{{ ds }}`` and whose scrapes take
    nothing, is a useful finding). A DAG whose tasks the linter does not see is information only when
    catchup was asked for."""
    for item in pending:
        dag = item.dag
        clock = _clock_tasks(item, recorder)
        if item.inherited is None and not clock and not item.checks and _makes_unseen(dag):
            recorder.info(
                "IDEM005",
                dag.file,
                item.line,
                f"catchup=True: when the DAG is unpaused the scheduler creates {item.what}; the linter "
                "sees none of its tasks (made by code it does not follow, such as a TaskGroup class), "
                "so it cannot tell whether each caught-up run takes its own window",
                dag_id=dag.dag_id,
            )
            continue
        windowless = not any(_takes_run_window(c) for c in item.checks)
        if item.inherited is not None and not windowless:  # nobody chose it: every task must take it
            windowless = not all(_takes_run_window(c) or _fed_or_idle(c) for c in item.checks)
        if clock or windowless:
            why = (
                f"its tasks read the clock or a window not the run's ({', '.join(clock)}): every caught-up "
                "run writes the same current data under another window"
                if clock
                else "no task takes the run's window: every caught-up run repeats the same work"
            )
            if item.inherited is not None:
                setting = f"{item.inherited}; {why}" if item.checks else item.inherited
                _finding(recorder, dag, item.line, setting, item.what, item.tail)
            else:
                _finding(recorder, dag, item.line, f"catchup=True ({why})", item.what)
            continue
        advice = (
            "; max_active_runs= is not set (it throttles the backlog) and no end_date= bounds it"
            if "max_active_runs" not in dag.kwargs
            else "; no end_date= bounds it"
        )
        if item.inherited is not None:
            advice += "; say catchup=True to choose the backlog, or catchup=False to skip it"
        setting = "catchup=True, chosen" if item.inherited is None else item.inherited
        recorder.info(
            "IDEM005",
            dag.file,
            item.line,
            f"{setting}: when the DAG is unpaused the scheduler creates {item.what}, and each "
            f"caught-up run writes its own window (its tasks take the run's data interval){advice}",
            dag_id=dag.dag_id,
        )


def _makes_unseen(dag: DagDef) -> bool:
    """The body of the DAG's ``with DAG(..)`` block or ``@dag`` function calls something, though the
    linter found no task in it: the calls make tasks it does not read (a ``TaskGroup`` class whose
    ``__init__`` adds them, an operator whose class sets its own ``task_id``). An empty body (or a DAG
    whose tasks attach by ``dag=``, not read here) has none to hide."""
    for node in ast.walk(dag.scope.tree):
        opens = isinstance(node, ast.With | ast.AsyncWith) and any(
            getattr(item.context_expr, "lineno", None) == dag.line for item in node.items
        )
        if not opens and not (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.lineno == dag.line
        ):
            continue
        if any(isinstance(n, ast.Call) for stmt in getattr(node, "body", []) for n in ast.walk(stmt)):
            return True
    return False

"""IDEM009 window-without-width: this package's window operators with no ``granularity=`` on a
schedule whose runs have no data interval.

PartitionOverwriteOperator, MergeOperator and the effect operators take their window from the run's
data interval when it has width, else from the logical date plus a declared ``granularity``. Airflow 3
schedules a cron string or preset (``"@daily"``, ``"0 3 * * *"``) with ``CronTriggerTimetable`` and a
timedelta with ``DeltaTriggerTimetable``: each run's data interval is one point in time
(start == end). With neither a width nor a granularity the operator raises ``WindowError`` on every
run, before it writes anything: the DAG never does its work. Not a finding when the deployment turns
``create_cron_data_intervals`` (``create_delta_data_intervals``) on, when the timetable gives
intervals (``CronDataIntervalTimetable``, ``interval=`` on a trigger timetable) or when the DAG has
no time-based schedule (None, ``@once``, assets): not judged, since a run triggered by hand or through
the REST API may carry its own data interval.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.definitions import DagDef, TaskDef
from airflow_idempotent.lint.deployment import DataIntervals
from airflow_idempotent.lint.findings import Recorder
from airflow_idempotent.lint.schedule import dag_schedule
from airflow_idempotent.lint.syntax import dotted, keywords, last_name

__all__ = ["EFFECT_OPERATORS", "WINDOW_OPERATORS", "check_window_width", "is_package_operator"]

#: This package's effect operators: each effect is sent once per (DAG, task, window, effect, key),
#: recorded in a ledger, with an idempotency key where the receiver takes one.
EFFECT_OPERATORS = frozenset({"HttpPostEffectOperator", "EmailEffectOperator", "FileDeliveryEffectOperator"})
#: Operators of this package that derive a window from the run (by class name).
WINDOW_OPERATORS = frozenset({"PartitionOverwriteOperator", "MergeOperator"}) | EFFECT_OPERATORS
#: Airflow 3 timetables whose runs are points in time unless given ``interval=``.
_TRIGGER_TIMETABLES = frozenset(
    {"CronTriggerTimetable", "DeltaTriggerTimetable", "MultipleCronTriggerTimetable"}
)


def _pointlike(dag: DagDef, intervals: DataIntervals) -> str | None:
    """How the DAG's schedule gives runs without a data interval (for the message), or None."""
    schedule = dag_schedule(dag)
    if schedule is None:
        return None
    if schedule.cron is not None:
        if intervals.cron:
            return None
        return (
            f"schedule={schedule.shown!r} runs on Airflow 3's default cron timetable (CronTriggerTimetable): "
            "each run's data interval is one point in time (data_interval_start == data_interval_end)"
        )
    node = dag.kwargs.get("schedule", dag.kwargs.get("schedule_interval"))
    value, _inner = dag.scope.value(node)
    if not isinstance(value, ast.Call):
        return None
    name = last_name(dotted(value.func))
    if name in _TRIGGER_TIMETABLES:
        if "interval" in keywords(value):
            return None
        return f"{name} without interval= gives each run a data interval of one point in time"
    if "Timetable" in name or intervals.delta:
        return None  # another timetable: its intervals are its own; delta intervals turned on
    return (
        f"schedule={schedule.shown} runs on Airflow 3's default timedelta timetable "
        "(DeltaTriggerTimetable): each run's data interval is one point in time"
    )


def is_package_operator(task: TaskDef, names: frozenset[str] = WINDOW_OPERATORS) -> bool:
    """The task's operator is one of this package's `names`: by class name, not imported from
    another package."""
    if task.operator not in names:
        return False
    imported = task.scope.imports.get(task.operator)
    return imported is None or imported[0].startswith("airflow_idempotent")


def check_window_width(dag: DagDef, recorder: Recorder, intervals: DataIntervals) -> None:
    """IDEM009 for each of the DAG's window operators that declares no granularity while the DAG's
    schedule gives runs no data interval."""
    if "granularity" in dag.default_args:
        return
    tasks = [t for t in dag.tasks if is_package_operator(t) and "granularity" not in t.kwargs]
    if not tasks:
        return
    why = _pointlike(dag, intervals)
    if why is None:
        return
    for task in tasks:
        file = task.scope.source.display
        recorder.add(
            "IDEM009",
            file,
            task.line,
            f"{task.operator} declares no granularity= and {why}, so the window has no width: every run "
            "fails with WindowError before writing anything",
            cause="window-width",
            dag_id=dag.dag_id,
            task_id=task.task_id,
            anchors=((file, task.line),),
        )

"""A try whose process was killed records no end: its state is read from Airflow when history is read.

The listener records a try's start (``running``) and its end from inside the task's process. A
process killed by SIGKILL, the OOM killer or a lost node records no end, so its last record stays
``running``. Airflow itself decides what became of it: the scheduler notices the missing heartbeat
(``[scheduler] task_instance_heartbeat_timeout``) and sets the try to ``failed`` or
``up_for_retry``; the DAG run ends ``failed`` or ``success`` later. So a read of the history asks
Airflow's metadata database about the tries (and runs) whose last record is ``running`` and shows
Airflow's state, marked ``reconciled`` (its source: ``airflow``). Nothing is written: the history
keeps what was recorded.

Why not mark old ``running`` records stale after a timeout: a long task is not a dead one, and a
timeout chosen here would disagree with the scheduler's, which is the one that retries the task.
Where Airflow's database cannot be read (the CLI outside the deployment) or has no such try (its
rows purged), the state stays as recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from airflow_idempotent.history.report import FAILED_STATES

log = logging.getLogger(__name__)

#: A try or a run in one of these states has not ended: nothing to reconcile. Airflow's unfinished
#: task states, `awaiting_input` among them (Airflow 3.3's human-in-the-loop wait: a try parked
#: for an approval), but not `up_for_retry`: that try has ended (its retry is the next try).
UNFINISHED = (
    "running",
    "queued",
    "scheduled",
    "deferred",
    "awaiting_input",
    "restarting",
    "up_for_reschedule",
    None,
)
TryKey = tuple[str, str, str, int, int]


def _airflow_tries(runs: set[tuple[str, str]]) -> dict[TryKey, tuple[str, datetime | None]]:
    """(dag_id, run_id, task_id, map_index, try_number) -> (state, end_date) from Airflow's
    task_instance (the current try) and task_instance_history (earlier tries) of `runs`."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancehistory import TaskInstanceHistory
    from airflow.utils.session import create_session

    found: dict[TryKey, tuple[str, datetime | None]] = {}
    with create_session() as session:
        for model in (TaskInstanceHistory, TaskInstance):
            query = sa.select(
                model.dag_id,
                model.run_id,
                model.task_id,
                model.map_index,
                model.try_number,
                model.state,
                model.end_date,
            ).where(sa.or_(*(sa.and_(model.dag_id == d, model.run_id == r) for d, r in sorted(runs))))
            for row in session.execute(query):
                found[(row[0], row[1], row[2], row[3], row[4])] = (str(row[5]) if row[5] else "", row[6])
    return found


def _airflow_runs(runs: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, datetime | None]]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        query = sa.select(DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.end_date).where(
            sa.or_(*(sa.and_(DagRun.dag_id == d, DagRun.run_id == r) for d, r in sorted(runs)))
        )
        return {(row[0], row[1]): (str(row[2]) if row[2] else "", row[3]) for row in session.execute(query)}


def _ended(state: str) -> bool:
    return bool(state) and state not in UNFINISHED


def reconcile_runs(runs: Iterable[dict[str, Any]]) -> None:
    """Give the tries and runs of `runs` (`runs.shape_runs`) whose last record is ``running`` the
    state Airflow has for them, when Airflow has ended them; each one changed gets
    ``reconciled = "airflow"``. Airflow unreachable: nothing changes."""
    runs = list(runs)
    open_tries = [(run, t) for run in runs for t in run["tries"] if t["state"] in UNFINISHED]
    open_runs = [run for run in runs if run["state"] in UNFINISHED]
    keys = {(run["dag_id"], run["run_id"]) for run, _ in open_tries} | {
        (run["dag_id"], run["run_id"]) for run in open_runs
    }
    if not keys:
        return
    try:
        tries = _airflow_tries(keys) if open_tries else {}
        dag_runs = _airflow_runs(keys) if open_runs else {}
    except Exception as err:  # no metadata database here, or it cannot be read: keep what was recorded
        log.debug("history: Airflow's states not read (%s): tries stay as recorded", err)
        return
    for _run, entry in open_tries:
        key = (entry["dag_id"], entry["run_id"], entry["task_id"], entry["map_index"], entry["try_number"])
        _apply(entry, tries.get(key))
        entry["failed"] = entry["state"] in FAILED_STATES or entry["failed"]
    for run in open_runs:
        _apply(run, dag_runs.get((run["dag_id"], run["run_id"])))


def _apply(entry: dict[str, Any], airflow: tuple[str, datetime | None] | None) -> None:
    if airflow is None or not _ended(airflow[0]):
        return
    state, ended_at = airflow
    entry["state"] = state
    entry["reconciled"] = "airflow"
    if ended_at is not None and entry.get("ended_at") is None:
        entry["ended_at"] = ended_at
        started = entry.get("started_at")
        if started is not None:
            entry["duration_seconds"] = round((ended_at - started).total_seconds(), 3)


def is_reconciled(entry: Mapping[str, Any]) -> bool:
    return entry.get("reconciled") == "airflow"

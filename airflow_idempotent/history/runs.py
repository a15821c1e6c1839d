"""The run history: every DAG run and task attempt the listener recorded, window writes or not.

A DAG whose tasks write no windows (a plain ``@task``, a sensor) is still reviewable: which
runs it had, which try of which task failed where, on which host and with what error. The
window-centric view (`report.window_history`) answers "what happened to this window"; this one
answers "what happened in this run".

Runs are read from the DAG run events, the task attempts and the window writes (a run whose DAG
run events the scheduler did not record still shows up; with days, a run matches by its logical
date or by a window it wrote overlapping them). Three set-based statements with bound values
read every DAG run event, task attempt and window write of the matching runs (newest first, at
most ``limit``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import Select

from airflow_idempotent.history.models import DagRunEvent, TaskAttempt, WindowWrite
from airflow_idempotent.history.reconcile import is_reconciled, reconcile_runs
from airflow_idempotent.history.report import (
    ATTEMPT_FIELDS,
    FAILED_STATES,
    FLAG_FAILED,
    FLAG_NONDETERMINISTIC,
    FLAG_SKIPPED,
    WRITE_FIELDS,
    HistoryFilter,
    attempt_failed,
    store_is_empty,
    target_matches,
)
from airflow_idempotent.history.store import HistoryStore

RUN_EVENT_FIELDS = (
    "dag_id",
    "run_id",
    "event",
    "at",
    "state",
    "run_type",
    "logical_date",
    "data_interval_start",
    "data_interval_end",
    "semantics",
    "policy_version",
    "source",
    "message",
)

_R = DagRunEvent.__table__
_A = TaskAttempt.__table__
_W = WindowWrite.__table__


def _scope(table: Any, flt: HistoryFilter) -> list[sa.ColumnElement[bool]]:
    """Only the DAGs `flt.dag_ids` allows (every DAG when it is None): what a UI user may read."""
    return [] if flt.dag_ids is None else [table.c.dag_id.in_(sorted(flt.dag_ids))]


def _run_keys(flt: HistoryFilter) -> Select[Any]:
    """(dag_id, run_id, first seen) of every run matching `flt`, from the three tables."""
    parts: list[Select[Any]] = []
    # a table filter: the runs that wrote it; a task filter: the runs that task had an attempt in
    tables = () if flt.table is not None else (_A,) if flt.task_id is not None else (_R, _A)
    for table in tables:
        clauses: list[sa.ColumnElement[bool]] = _scope(table, flt)
        if flt.dag_id is not None:
            clauses.append(table.c.dag_id == flt.dag_id)
        if flt.run_id is not None:
            clauses.append(table.c.run_id == flt.run_id)
        if flt.task_id is not None:
            clauses.append(table.c.task_id == flt.task_id)
        if flt.start is not None:  # runs whose logical date falls in the days asked for
            clauses.append(table.c.logical_date >= flt.start)
        if flt.end is not None:
            clauses.append(table.c.logical_date < flt.end)
        parts.append(sa.select(table.c.dag_id, table.c.run_id, table.c.at).where(*clauses))
    # and the runs that wrote a window overlapping the days (whatever their logical date)
    writes: list[sa.ColumnElement[bool]] = _scope(_W, flt) + [
        _W.c[name] == value
        for name, value in (("dag_id", flt.dag_id), ("run_id", flt.run_id), ("task_id", flt.task_id))
        if value is not None
    ]
    if flt.table is not None:
        writes.append(target_matches(flt.table))
    if flt.start is not None:
        writes.append(_W.c.window_end > flt.start)
    if flt.end is not None:
        writes.append(_W.c.window_start < flt.end)
    parts.append(sa.select(_W.c.dag_id, _W.c.run_id, _W.c.written_at.label("at")).where(*writes))
    both = sa.union_all(*parts).subquery("seen")
    first = sa.func.min(both.c.at).label("first_at")
    flagged = [] if flt.flag is None else [_carries_flag(both, flt.flag)]
    return (
        sa.select(both.c.dag_id, both.c.run_id, first)
        .where(*flagged)
        .group_by(both.c.dag_id, both.c.run_id)
        .order_by(first.desc(), both.c.dag_id, both.c.run_id)
        .limit(flt.limit)
    )


def _carries_flag(runs: Any, flag: str) -> sa.ColumnElement[bool]:
    """The run has a write with `flag` (non-deterministic, skipped), or, for `failed`, a failed
    attempt, a failed DAG run event or a refused write: `--flag` lists those runs only."""
    if flag == FLAG_NONDETERMINISTIC:
        return sa.exists().where(_of_runs(_W, runs), _W.c.nondeterministic == sa.true())
    if flag == FLAG_SKIPPED:
        return sa.exists().where(_of_runs(_W, runs), _W.c.status == "skipped")
    return sa.or_(
        sa.exists().where(_of_runs(_W, runs), _W.c.status == "refused"),
        sa.exists().where(
            _of_runs(_A, runs), sa.or_(_A.c.state.in_(FAILED_STATES), _A.c.event.in_(FAILED_STATES))
        ),
        sa.exists().where(
            _of_runs(_R, runs), sa.or_(_R.c.state.in_(FAILED_STATES), _R.c.event.in_(FAILED_STATES))
        ),
    )


def _of_runs(table: Any, runs: Any) -> sa.ColumnElement[bool]:
    return sa.and_(table.c.dag_id == runs.c.dag_id, table.c.run_id == runs.c.run_id)


def run_events_query(flt: HistoryFilter) -> Select[Any]:
    """Every DAG run event of the runs of `flt`, in the order they happened."""
    runs = _run_keys(flt).subquery("runs")
    return sa.select(_R).join(runs, _of_runs(_R, runs)).order_by(_R.c.at, _R.c.id)


def _task_rows_query(table: Any, flt: HistoryFilter, *order: Any) -> Select[Any]:
    """Every row of `table` in the runs of `flt` (of its task, when given), in `order`."""
    runs = _run_keys(flt).subquery("runs")
    query = sa.select(table).join(runs, _of_runs(table, runs))
    if flt.task_id is not None:
        query = query.where(table.c.task_id == flt.task_id)
    return query.order_by(*order)


def run_attempts_query(flt: HistoryFilter) -> Select[Any]:
    """Every task attempt event of the runs of `flt` (of its task, when given), in order."""
    return _task_rows_query(_A, flt, _A.c.at, _A.c.id)


def run_writes_query(flt: HistoryFilter) -> Select[Any]:
    """Every window write of the runs of `flt` (of its task, when given), in order."""
    return _task_rows_query(_W, flt, _W.c.written_at, _W.c.id)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return round((end - start).total_seconds(), 3) if start is not None and end is not None else None


def summarise_tries(attempts: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Attempt events -> one entry per try of a task instance: its final state, when it started
    and ended, how long it took, the host, the error, and its events."""
    tries: dict[tuple[Any, ...], dict[str, Any]] = {}
    for event in attempts:
        key = (event["task_id"], event["map_index"], event["try_number"])
        entry = tries.get(key)
        if entry is None:
            entry = tries[key] = {
                "dag_id": event["dag_id"],
                "run_id": event["run_id"],
                "task_id": event["task_id"],
                "map_index": event["map_index"],
                "try_number": event["try_number"],
                "state": None,
                "started_at": None,
                "ended_at": None,
                "duration_seconds": None,
                "hostname": None,
                "error": None,
                "failed": False,
                "events": [],
            }
        entry["events"].append(event)
        entry["state"] = event["state"] or event["event"]
        if event["event"] == "running" and entry["started_at"] is None:
            entry["started_at"] = event["at"]
        entry["ended_at"] = None if event["event"] == "running" else event["at"]
        entry["hostname"] = entry["hostname"] or event["hostname"]
        entry["error"] = event["error"] or entry["error"]
    for entry in tries.values():
        if entry["started_at"] is None:
            entry["started_at"] = entry["events"][0]["at"]
        entry["duration_seconds"] = _seconds(entry["started_at"], entry["ended_at"])
        entry["failed"] = attempt_failed(entry["events"][-1])
    return list(tries.values())


def shape_runs(
    events: Iterable[Mapping[str, Any]],
    attempts: Iterable[Mapping[str, Any]],
    writes: Iterable[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Rows of the three queries -> one dict per run, newest run first.

    Each run: ``dag_id``, ``run_id``, ``run_type``, ``state`` (the latest DAG run event's, else
    the latest attempt's), ``logical_date``, ``started_at``, ``ended_at``, ``duration_seconds``,
    ``events`` (DAG run events), ``attempts`` (every task attempt event, each with ``dag_id``,
    ``task_id``, ``run_id``, ``try_number``, ``state``, ``failed``), ``tries`` (one per try, see
    `summarise_tries`) and ``writes`` (its window writes).
    """
    runs: dict[tuple[str, str], dict[str, Any]] = {}

    def run_of(row: Mapping[str, Any]) -> dict[str, Any]:
        key = (row["dag_id"], row["run_id"])
        if key not in runs:
            runs[key] = {
                "dag_id": row["dag_id"],
                "run_id": row["run_id"],
                "run_type": None,
                "state": None,
                "logical_date": None,
                "started_at": None,
                "ended_at": None,
                "duration_seconds": None,
                "events": [],
                "attempts": [],
                "tries": [],
                "writes": [],
            }
        return runs[key]

    for row in events:
        run = run_of(row)
        run["events"].append({name: row[name] for name in RUN_EVENT_FIELDS})
    for row in attempts:
        attempt = {name: row[name] for name in ATTEMPT_FIELDS}
        attempt["run_type"] = row["run_type"]
        attempt["logical_date"] = row["logical_date"]
        attempt["failed"] = attempt_failed(attempt)
        run_of(row)["attempts"].append(attempt)
    for row in writes:
        write = {name: row[name] for name in WRITE_FIELDS}
        write.update(target=row["target"], window_start=row["window_start"], window_end=row["window_end"])
        write["window_label"] = row["window_label"]
        run_of(row)["writes"].append(write)

    for run in runs.values():
        known = [*run["events"], *run["attempts"]]
        run["run_type"] = next((r["run_type"] for r in [*known, *run["writes"]] if r.get("run_type")), None)
        run["logical_date"] = next((r["logical_date"] for r in known if r.get("logical_date")), None)
        times = [r["at"] for r in known] + [w["written_at"] for w in run["writes"]]
        run["started_at"] = min(times) if times else None
        finals = [e for e in run["events"] if e["event"] != "running"]
        if run["events"]:
            run["state"] = run["events"][-1]["state"] or run["events"][-1]["event"]
        elif run["attempts"]:
            run["state"] = run["attempts"][-1]["state"] or run["attempts"][-1]["event"]
        run["ended_at"] = finals[-1]["at"] if finals else None
        run["duration_seconds"] = _seconds(run["started_at"], run["ended_at"])
        run["tries"] = summarise_tries(run["attempts"])
    return sorted(runs.values(), key=lambda r: r["started_at"], reverse=True)


def run_history(store: HistoryStore, flt: HistoryFilter | None = None) -> list[dict[str, Any]]:
    """The DAG runs matching `flt` (dag, run, task, logical date), each with its DAG run events,
    every task attempt and try, and its window writes; newest run first, at most ``limit``.

    ``table`` keeps the runs that wrote that table; ``flag`` the runs carrying it (`_carries_flag`);
    ``dag_ids`` (the DAGs a UI user may read) limits every table read. A try whose last record is
    ``running`` gets Airflow's state when Airflow has ended it (`reconcile`). Raises SQLAlchemy's
    errors when the store cannot be reached.
    """
    flt = flt or HistoryFilter()
    if (flt.dag_ids is not None and not flt.dag_ids) or store_is_empty(store):
        return []
    store.migrate()
    with store.engine.connect() as conn:
        events = [dict(r._mapping) for r in conn.execute(run_events_query(flt))]
        attempts = [dict(r._mapping) for r in conn.execute(run_attempts_query(flt))]
        writes = [dict(r._mapping) for r in conn.execute(run_writes_query(flt))]
    runs = shape_runs(events, attempts, writes)
    reconcile_runs(runs)  # a killed try recorded no end: Airflow's state, when Airflow has ended it
    if flt.flag == FLAG_FAILED:
        runs = _with_killed_runs(store, flt, runs)
    return runs


def _with_killed_runs(
    store: HistoryStore, flt: HistoryFilter, runs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`--flag failed` and the runs whose failure only Airflow knows (a killed try recorded no end):
    among the latest `limit` runs matching the other filters, those reconciled as failed."""
    seen = {(r["dag_id"], r["run_id"]) for r in runs}
    killed = [
        run
        for run in run_history(store, replace(flt, flag=None))
        if (run["dag_id"], run["run_id"]) not in seen
        and any(is_reconciled(e) and e["state"] in FAILED_STATES for e in [run, *run["tries"]])
    ]
    if not killed:
        return runs
    merged = sorted([*runs, *killed], key=lambda r: r["started_at"], reverse=True)
    return merged[: flt.limit]

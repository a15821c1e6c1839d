"""Guarded backfills from the UI: the DAG's guard, the preview, creation through Airflow's own
route after the guard's own evaluation, per-window status, stop (kill switch, then pause), clear.

Every rule is the guard's or Airflow's, called here, never re-implemented: the guard's answer is
`evaluate_backfill_request` / `airflow_decide` (what its middleware answers in front of
`POST /api/v2/backfills`), the windows are Airflow's `_get_info_list`, a run's window is
`GuardConfig.window` (the operators' rule).

The guard's API (`airflow_idempotent.guard`) is imported by this module only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from airflow_idempotent.guard import GuardConfig, GuardRefusal, Thresholds
from airflow_idempotent.guard.backfills import (
    AirflowRuns,
    TooManyWindows,
    airflow_decide,
    evaluate_backfill_request,
    guard_of,
    info_list,
)
from airflow_idempotent.guard.killswitch import active_switches, clear_switch, set_switch
from airflow_idempotent.guard.scope import rewritten
from airflow_idempotent.history.report import jsonable
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.plugins.ui.datamodels import BackfillForm, airflow_backfill_body, backfill_conf
from airflow_idempotent.plugins.ui.dependencies import load_dag, store_error
from airflow_idempotent.plugins.ui.history import existing_writes, writes_by_run
from airflow_idempotent.window import to_utc_datetime

#: Windows a preview lists (a longer range is counted and refused over the cap, not listed).
PREVIEW_LIST = 400
#: The most windows a preview evaluates: a longer range is a 422 before any window is looked up.
#: Above any cap in use, so the page still counts an over-cap range for its approval (the guard
#: itself evaluates up to `guard.backfills.MAX_WINDOWS` in a create request).
MAX_PREVIEW = 1_000


def too_many_windows(config: GuardConfig | None) -> HTTPException:
    """The 422 of a preview whose range holds more than MAX_PREVIEW windows."""
    cap = f"; the DAG's cap is {config.cap}" if config is not None else ""
    return HTTPException(
        422,
        f"this range holds more than {MAX_PREVIEW} windows, more than a preview evaluates{cap}: "
        "narrow from_date..to_date (a backfill that long must be split anyway).",
    )


def dag_guard(dag: Any) -> tuple[GuardConfig | None, str | None]:
    """(the guard the DAG declares or None, the reason it is invalid or None)."""
    try:
        return guard_of(dag), None
    except GuardRefusal as refusal:
        return None, str(refusal)


def guard_json(config: GuardConfig | None) -> dict[str, Any] | None:
    """The guard's declaration as JSON (what the pages show and the API answers)."""
    return None if config is None else config.to_json()


def window_span(run: Any, config: GuardConfig) -> tuple[datetime, datetime, str]:
    """[start, end) (UTC) and label of the window a run writes: the operators' rule, in the zone
    and anchor the guard declares."""
    window = config.window(run)
    return to_utc_datetime(window.start), to_utc_datetime(window.end), window.label()


def switches_json(store: HistoryStore, dag_id: str) -> list[dict[str, Any]]:
    """The kill switches that cover this DAG's backfills."""
    return [
        {
            "scope": s.scope,
            "scope_key": s.scope_key,
            "reason": s.reason,
            "set_by": s.set_by,
            "set_at": jsonable(s.set_at),
            "description": s.describe(),
        }
        for s in active_switches(store, dag_id, backfill=True)
    ]


def _state(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def backfill_json(backfill: Any) -> dict[str, Any]:
    """An Airflow backfill as the pages and the API show it."""
    return {
        "id": backfill.id,
        "dag_id": backfill.dag_id,
        "from_date": jsonable(backfill.from_date),
        "to_date": jsonable(backfill.to_date),
        "dag_run_conf": backfill.dag_run_conf,
        "is_paused": bool(backfill.is_paused),
        "reprocess_behavior": _state(backfill.reprocess_behavior),
        "max_active_runs": backfill.max_active_runs,
        "created_at": jsonable(backfill.created_at),
        "completed_at": jsonable(backfill.completed_at),
        "triggering_user_name": backfill.triggering_user_name,
    }


def guard_state(session: Session, store: HistoryStore, dag: Any) -> dict[str, Any]:
    """The guard `dag` (the path's, `DagDep`) declares (or why it is invalid), its latest backfill,
    the switches covering its backfills (`history_error` when the store cannot be read)."""
    from airflow.models.backfill import Backfill

    dag_id = dag.dag_id
    config, invalid = dag_guard(dag)
    latest = session.scalar(
        sa.select(Backfill).where(Backfill.dag_id == dag_id).order_by(Backfill.id.desc()).limit(1)
    )
    state: dict[str, Any] = {
        "dag_id": dag_id,
        "guarded": config is not None or invalid is not None,
        "guard": guard_json(config),
        "invalid": invalid,
        "latest_backfill": backfill_json(latest) if latest is not None else None,
        "switches": [],
        "history_error": None,
    }
    try:
        state["switches"] = switches_json(store, dag_id)
    except Exception as err:
        state["history_error"] = store_error(err)
    return jsonable(state)  # type: ignore[no-any-return]


def _airflow_checks(dag: Any, form: BackfillForm) -> str | None:
    """What Airflow itself refuses for this request (its own checks and messages), or None."""
    from airflow.exceptions import AirflowException
    from airflow.models.backfill import ReprocessBehavior, _validate_backfill_params
    from airflow.utils.types import DagRunType

    if not dag.timetable.periodic:
        return f"{dag.dag_id} has a non-periodic schedule that does not support backfills"
    if dag.allowed_run_types is not None and DagRunType.BACKFILL_JOB not in dag.allowed_run_types:
        return f"Dag with dag_id: '{dag.dag_id}' does not allow backfill runs"
    try:
        _validate_backfill_params(
            dag,
            form.run_backwards,
            form.from_date,
            form.to_date,
            ReprocessBehavior(form.reprocess_behavior),
            backfill_conf(form),
        )
    except AirflowException as err:
        return str(err)
    return None


def _conf_thresholds(conf: Mapping[str, Any]) -> Thresholds | None:
    """The stop conditions the conf declares, as the guard reads them."""
    return Thresholds.from_mapping(conf["thresholds"], "form") if "thresholds" in conf else None


def _active_backfill_id(session: Session, dag_id: str) -> int | None:
    from airflow.models.backfill import Backfill

    return session.scalar(
        sa.select(Backfill.id).where(Backfill.dag_id == dag_id, Backfill.completed_at.is_(None)).limit(1)
    )


def preview(session: Session, store: HistoryStore, dag: Any, form: BackfillForm) -> dict[str, Any]:
    """What creating this backfill of `dag` (the path's, `DagDep`) would do, creating nothing."""
    from airflow._shared.timezones import timezone as airflow_tz
    from airflow.models.backfill import ReprocessBehavior

    dag_id = dag.dag_id
    config, invalid = dag_guard(dag)
    now = airflow_tz.utcnow()
    conf = backfill_conf(form)
    result: dict[str, Any] = {
        "dag_id": dag_id,
        "guarded": config is not None or invalid is not None,
        "guard": guard_json(config),
        "conf": conf,
        "windows": [],
        "listed": 0,
        "total_in_range": 0,
        "count": 0,
        "cap": config.cap if config else None,
        "over_cap": False,
        "approval_needed": None,
        "refusal": invalid,
        "airflow_refusal": None,
        "blocked": [],
        "switches": [],
        "history_error": None,
        "effective_thresholds": None,
        "can_submit": False,
    }
    if config is None and invalid is None:
        result["refusal"] = (
            f"{dag_id} declares no idempotent_guard param: it is not a guarded DAG. Use Airflow's own "
            "Backfill dialog, or declare a guard (GuardConfig(...).param()) in the DAG file."
        )
        return jsonable(result)  # type: ignore[no-any-return]
    airflow_refusal = _airflow_checks(dag, form)
    result["airflow_refusal"] = airflow_refusal
    behavior = ReprocessBehavior(form.reprocess_behavior)
    infos: list[Any] = []
    if airflow_refusal is None:
        try:
            infos = info_list(dag, form.from_date, form.to_date, form.run_backwards, MAX_PREVIEW)
        except TooManyWindows:
            raise too_many_windows(config) from None
        except Exception as err:
            result["refusal"] = f"the DAG's timetable failed ({type(err).__name__}: {err})"
    result["total_in_range"] = len(infos)
    runs = AirflowRuns(session, dag_id)
    runs.prepare(infos)  # one query for every window's latest run
    will_run: dict[Any, bool] = {}  # (logical date, partition key) -> Airflow (re)runs it
    rows: list[dict[str, Any]] = []
    for info in infos:
        key = (info.logical_date, info.partition_key)
        run = runs.latest(info)
        reason = runs.skip_reason(info, behavior)
        will_run[key] = reason is None
        if len(rows) < PREVIEW_LIST:
            row: dict[str, Any] = {
                "logical_date": info.logical_date,
                "partition_key": info.partition_key,
                "will_run": reason is None,
                "skip_reason": str(reason.value if hasattr(reason, "value") else reason) if reason else None,
                "run_state": str(getattr(run.state, "value", run.state)) if run is not None else None,
                "run_id": run.run_id if run is not None else None,
                "existing": [],
            }
            if config is not None:
                try:
                    row["start"], row["end"], row["label"] = window_span(info, config)
                except Exception as err:
                    row["label"] = f"window unknown ({type(err).__name__})"
            rows.append(row)
    result["windows"] = rows
    result["listed"] = len(rows)
    result["count"] = sum(will_run.values())
    if config is not None:
        result["runs"] = result["count"]
        result["count"] = rewritten(config, result["count"])  # with lookback: periods rewritten
        spans = [(r["start"], r["end"]) for r in rows if "start" in r]
        try:
            existing = existing_writes(store, dag_id, spans)
            for row in rows:
                if "start" in row:
                    row["existing"] = existing.get((row["start"], row["end"]), [])
            result["switches"] = switches_json(store, dag_id)
        except Exception as err:
            result["history_error"] = store_error(err)
        result["over_cap"] = result["count"] > config.cap
        if result["over_cap"]:
            result["approval_needed"] = result["count"]
        try:
            own = _conf_thresholds(conf)
            config.check_measures(own, "conf thresholds")
            thresholds = config.thresholds.merged(own)
            result["effective_thresholds"] = thresholds.__dict__ | {
                "max_measure_abs_change": dict(thresholds.max_measure_abs_change),
                "max_measure_rel_change": dict(thresholds.max_measure_rel_change),
            }
        except GuardRefusal as bad:
            result["refusal"] = str(bad)
    if airflow_refusal is None and infos and result["refusal"] is None:
        refusal = evaluate_backfill_request(
            airflow_backfill_body(form, dag_id),
            dag,
            now=now,
            dry_run=False,
            will_run=lambda info, _behavior: will_run.get((info.logical_date, info.partition_key), True),
            infos=infos,  # the timetable walked once per preview
        )
        result["refusal"] = str(refusal) if refusal is not None else None
    if airflow_refusal is None and infos and result["count"] == 0:
        result["airflow_refusal"] = (
            "every window of this range already has a run Airflow will not rerun under reprocess "
            f"behavior {form.reprocess_behavior!r}: nothing would run (choose 'completed' to rerun them)"
        )
    elif airflow_refusal is None and not infos:
        result["airflow_refusal"] = (
            f"No runs to create for Dag {dag_id} in the range [{form.from_date}, {form.to_date}]: "
            "no window of the range has closed"
        )
    active = _active_backfill_id(session, dag_id)
    if active is not None:
        result["blocked"].append(
            f"backfill {active} of this DAG is still running: Airflow runs one backfill per DAG at a time"
        )
    if result["switches"]:
        result["blocked"].append(
            "a kill switch covers this DAG's backfills: every window would refuse to write. Clear it "
            "first (the button below, or `airflow-idempotent resume --dag "
            f"{dag_id} --backfill`) once its cause is fixed"
        )
    if result["history_error"]:
        result["blocked"].append("the history store cannot be read: a guarded backfill does not write blind")
    result["can_submit"] = bool(
        config is not None
        and not result["refusal"]
        and not result["airflow_refusal"]
        and not result["blocked"]
        and result["count"] > 0
    )
    return jsonable(result)  # type: ignore[no-any-return]


def backfill_status(session: Session, store: HistoryStore, dag_id: str, backfill: Any) -> dict[str, Any]:
    """Each window of the backfill: its run's state and, as they land, its writes and diffs."""
    from airflow.models import DagRun
    from airflow.models.backfill import BackfillDagRun

    rows = session.execute(
        sa.select(BackfillDagRun, DagRun)
        .outerjoin(DagRun, DagRun.id == BackfillDagRun.dag_run_id)
        .where(BackfillDagRun.backfill_id == backfill.id)
        .order_by(BackfillDagRun.sort_ordinal)
    ).all()
    config: GuardConfig | None = None
    with contextlib.suppress(HTTPException):
        config, _ = dag_guard(load_dag(session, dag_id))
    windows: list[dict[str, Any]] = []
    spans: dict[int, tuple[datetime, datetime]] = {}
    for bdr, run in rows:
        entry: dict[str, Any] = {
            "sort_ordinal": bdr.sort_ordinal,
            "logical_date": jsonable(bdr.logical_date),
            "partition_key": bdr.partition_key,
            "exception_reason": bdr.exception_reason,
            "run_id": run.run_id if run is not None else None,
            "state": _state(run.state) if run is not None else None,
            "start_date": jsonable(run.start_date) if run is not None else None,
            "end_date": jsonable(run.end_date) if run is not None else None,
            "writes": [],
            "label": None,
        }
        if run is not None and config is not None:
            with contextlib.suppress(Exception):
                start, end, entry["label"] = window_span(run, config)
                spans[len(windows)] = (start, end)
        windows.append(entry)
    history_error = None
    switches: list[dict[str, Any]] = []
    try:
        by_run = writes_by_run(store, dag_id, list(spans.values()))
        # A backfill that reprocesses a window reruns its existing DAG run (same run_id, next
        # try): only the writes since this backfill was created are this backfill's.
        since = to_utc_datetime(backfill.created_at, "created_at")
        for entry in windows:
            mine = [w for w in by_run.get((dag_id, entry["run_id"] or ""), []) if w["written_at"] >= since]
            entry["writes"] = sorted(mine, key=lambda w: w["written_at"])
        switches = switches_json(store, dag_id)
    except Exception as err:
        history_error = store_error(err)
    states: dict[str, int] = {}
    for entry in windows:
        key = entry["state"] or (
            f"not run: {entry['exception_reason']}" if entry["exception_reason"] else "none"
        )
        states[key] = states.get(key, 0) + 1
    finished = backfill.completed_at is not None
    phase = "completed" if finished else ("paused" if backfill.is_paused else "running")
    if switches and not finished:
        phase = "stopped" if backfill.is_paused else "running (kill switch on: windows refuse to write)"
    return jsonable(  # type: ignore[no-any-return]
        {
            "backfill": backfill_json(backfill),
            "phase": phase,
            "finished": finished,
            "states": states,
            "windows": windows,
            "measures": list(config.measures) if config else [],
            "switches": switches,
            "history_error": history_error,
        }
    )


def create(
    session: Session, store: HistoryStore, scope: Any, user: Any, dag: Any, form: BackfillForm
) -> dict[str, Any]:
    """Create the backfill of `dag` (the path's, `DagDep`) as Airflow's `POST /api/v2/backfills`
    does, as `user`, once the guard (the same evaluation as its middleware in front of that route)
    lets it through. `scope` is the request's ASGI scope (the guard checks the caller's access as
    Airflow would)."""
    from airflow._shared.timezones import timezone as airflow_tz
    from airflow.api_fastapi.core_api.datamodels.backfills import BackfillPostBody
    from airflow.api_fastapi.core_api.routes.public.backfills import create_backfill

    dag_id = dag.dag_id
    config, invalid = dag_guard(dag)
    if invalid is not None:
        raise HTTPException(422, invalid)
    if config is None:
        raise HTTPException(
            422, f"{dag_id} declares no idempotent_guard param: use Airflow's own Backfill dialog for it"
        )
    try:
        switches = switches_json(store, dag_id)
    except Exception as err:
        raise HTTPException(503, f"{store_error(err)}; a guarded backfill does not write blind") from None
    if switches:
        raise HTTPException(
            409,
            f"{switches[0]['description']}: every window would refuse to write. Clear the switch first.",
        )
    body = airflow_backfill_body(form, dag_id)
    refusal = airflow_decide(dag_id, body, False, airflow_tz.utcnow(), scope, user)
    if refusal is not None:
        raise HTTPException(422, str(refusal))
    try:
        created = create_backfill(BackfillPostBody.model_validate(body), user, session)
    except RequestValidationError as err:
        errors = err.errors()
        raise HTTPException(422, errors if isinstance(errors, str) else str(errors)) from None
    return {"backfill": jsonable(created.model_dump(mode="json"))}


def stop(session: Session, store: HistoryStore, by: str, dag_id: str, backfill: Any, reason: str) -> None:
    """The kill switch on the DAG's backfill first (running windows refuse before commit), then
    Airflow's pause of the backfill (no further window starts). `by` is who, as the switch shows."""
    from airflow.api_fastapi.core_api.routes.public.backfills import pause_backfill

    if backfill.completed_at is not None:
        raise HTTPException(409, "Backfill is already completed.")
    try:
        set_switch(store, "backfill", dag_id, reason, by=by)
    except Exception as err:
        raise HTTPException(503, f"{store_error(err)}: the kill switch was not set") from None
    pause_backfill(backfill.id, session)
    session.commit()


def clear(store: HistoryStore, by: str, dag_id: str) -> bool:
    """Clear the DAG's backfill kill switch; True when it was on."""
    try:
        return clear_switch(store, "backfill", dag_id, by=by)
    except Exception as err:
        raise HTTPException(503, store_error(err)) from None

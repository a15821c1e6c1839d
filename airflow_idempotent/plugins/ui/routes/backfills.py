"""The backfill API: a DAG's guard, preview, create, status, stop, and clearing its kill switch."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from airflow_idempotent.plugins.ui.backfills import (
    backfill_status,
    clear,
    create,
    guard_state,
    preview,
    stop,
)
from airflow_idempotent.plugins.ui.datamodels import (
    BackfillForm,
    BackfillStatus,
    ClearedResponse,
    ClearForm,
    CreatedResponse,
    DagIdPath,
    GuardResponse,
    PreviewResponse,
    StopForm,
    error_responses,
)
from airflow_idempotent.plugins.ui.dependencies import (
    BackfillDep,
    DagDep,
    SessionDep,
    StoreDep,
    body_doc,
    json_body,
)
from airflow_idempotent.plugins.ui.security import (
    CREATE_RUNS,
    CSRF,
    EDIT_RUNS,
    READ_RUNS,
    UserDep,
    audit,
    user_name,
)

router = APIRouter(prefix="/api/dags/{dag_id}", tags=["backfill"])
#: The backfill id's routes match digits only (Starlette's int convertor), so that
#: `GET .../backfills/preview` is the preview route's 405, not a 422 for a bad id.


@router.get(
    "/guard",
    summary="The DAG's guard",
    dependencies=[READ_RUNS],
    response_model=GuardResponse,
    response_model_exclude_unset=True,
    responses=error_responses(404),
)
def api_guard(dag_id: DagIdPath, session: SessionDep, store: StoreDep, dag: DagDep) -> dict[str, Any]:
    """The guard the DAG declares (cap, thresholds, measures), the kill switches covering its
    backfills, and its latest backfill (if any)."""
    return guard_state(session, store, dag)


@router.post(
    "/backfills/preview",
    summary="Preview a guarded backfill (nothing is created)",
    dependencies=[CREATE_RUNS, CSRF],
    openapi_extra=body_doc(BackfillForm),
    response_model=PreviewResponse,
    response_model_exclude_unset=True,
    responses=error_responses(404, 413, 415),
)
def api_preview(
    dag_id: DagIdPath,
    form: Annotated[BackfillForm, Depends(json_body(BackfillForm))],
    session: SessionDep,
    store: StoreDep,
    dag: DagDep,
) -> dict[str, Any]:
    """The windows the backfill would run (Airflow's own list, minus what its reprocess
    behavior skips), how many against the DAG's cap, each window's existing data (table,
    policy version, dataset version, rows) and existing run, the effective thresholds, and what
    the guard (`refusal`) or Airflow (`airflow_refusal`) refuses; `blocked` lists what stops a
    submit (a running backfill, a kill switch, an unreadable history store)."""
    return preview(session, store, dag, form)


@router.post(
    "/backfills",
    summary="Create a guarded backfill",
    dependencies=[CREATE_RUNS, CSRF, Depends(audit("idempotent_create_backfill"))],
    openapi_extra=body_doc(BackfillForm),
    response_model=CreatedResponse,
    response_model_exclude_unset=True,
    responses=error_responses(404, 409, 413, 415, 503),
)
def api_create(
    request: Request,
    dag_id: DagIdPath,
    user: UserDep,
    form: Annotated[BackfillForm, Depends(json_body(BackfillForm))],
    session: SessionDep,
    store: StoreDep,
    dag: DagDep,
) -> dict[str, Any]:
    """Creates the backfill through Airflow's own creation route (as the caller), its DAG run
    conf built from the form. Refused with 422 and the guard's message (`detail`) as
    `POST /api/v2/backfills` would be; 409 when a kill switch covers the DAG's backfills or
    another backfill runs; 503 when the history store cannot be read."""
    return create(session, store, request.scope, user, dag, form)


@router.get(
    "/backfills/{backfill_id:int}",
    summary="A backfill's per-window status and diffs",
    dependencies=[READ_RUNS],
    response_model=BackfillStatus,
    response_model_exclude_unset=True,
    responses=error_responses(404),
)
def api_status(
    dag_id: DagIdPath, session: SessionDep, store: StoreDep, backfill: BackfillDep
) -> dict[str, Any]:
    """`phase` (running, paused, stopped, completed), counts of run `states`, and per window its
    run (state, run_id), and every write recorded for it so far (status, rows, checksum,
    dataset and policy version, `diff`, message), the kill switches and `history_error`."""
    return backfill_status(session, store, dag_id, backfill)


@router.post(
    "/backfills/{backfill_id:int}/stop",
    summary="Stop a backfill: kill switch, then pause",
    dependencies=[EDIT_RUNS, CSRF, Depends(audit("idempotent_stop_backfill"))],
    openapi_extra=body_doc(StopForm),
    response_model=BackfillStatus,
    response_model_exclude_unset=True,
    responses=error_responses(404, 409, 413, 415, 503),
)
def api_stop(
    dag_id: DagIdPath,
    user: UserDep,
    form: Annotated[StopForm, Depends(json_body(StopForm))],
    session: SessionDep,
    store: StoreDep,
    backfill: BackfillDep,
) -> dict[str, Any]:
    """Sets the DAG's backfill kill switch (a window already writing refuses before commit,
    every later one before writing), then pauses the Airflow backfill (no new window starts).
    Answers the backfill's status. 409 if it already completed."""
    stop(session, store, f"{user_name(user)} (UI)", dag_id, backfill, form.reason)
    return backfill_status(session, store, dag_id, backfill)


@router.post(
    "/killswitch/clear",
    summary="Clear the DAG's backfill kill switch",
    dependencies=[EDIT_RUNS, CSRF, Depends(audit("idempotent_clear_kill_switch"))],
    openapi_extra=body_doc(ClearForm),
    response_model=ClearedResponse,
    response_model_exclude_unset=True,
    responses=error_responses(404, 413, 415, 503),
)
def api_clear(
    dag_id: DagIdPath,
    user: UserDep,
    form: Annotated[ClearForm, Depends(json_body(ClearForm))],
    store: StoreDep,
    dag: DagDep,  # an unknown DAG is the documented 404, not a switch cleared for nothing
) -> dict[str, Any]:
    """`{"cleared": true}` when the switch was on. Global and DAG-wide switches are left alone
    (`airflow-idempotent resume`)."""
    return {"cleared": clear(store, f"{user_name(user)} (UI)", dag_id)}

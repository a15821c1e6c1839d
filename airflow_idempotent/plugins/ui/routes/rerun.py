"""The rerun preview: the page a window row's "Preview rerun" opens, and the POST that runs it.

The POST stages each window-write task's rows (a temporary table, always rolled back), so it is
guarded as a write: Airflow's permission to create the DAG's runs (as the backfill preview), the
CSRF check of every state-changing route, a JSON body bounded and parsed only after both, and an
entry in Airflow's audit log (the Event Log) for who previewed which DAG.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from airflow_idempotent.plugins.ui.datamodels import (
    DagIdPath,
    RerunForm,
    RerunPreviewResponse,
    RerunQuery,
    error_responses,
)
from airflow_idempotent.plugins.ui.dependencies import DagDep, SessionDep, StoreDep, body_doc, json_body
from airflow_idempotent.plugins.ui.render import render, root_path
from airflow_idempotent.plugins.ui.rerun import page_data, rerun_preview
from airflow_idempotent.plugins.ui.security import (
    CREATE_RUNS,
    CSRF,
    READ_RUNS,
    UserDep,
    audit,
    csrf_token,
    user_name,
)

router = APIRouter(prefix="/api/dags/{dag_id}", tags=["rerun"])
pages = APIRouter(include_in_schema=False)


@router.post(
    "/rerun/preview",
    summary="Preview rerunning a window (nothing is written)",
    # Audited like the backfill routes: it runs the DAG's SQL against production (staged, rolled back).
    dependencies=[CREATE_RUNS, CSRF, Depends(audit("idempotent_preview_rerun"))],
    openapi_extra=body_doc(RerunForm),
    response_model=RerunPreviewResponse,
    response_model_exclude_unset=True,
    responses=error_responses(404, 413, 415, 503),
)
def api_rerun_preview(
    dag_id: DagIdPath,
    form: Annotated[RerunForm, Depends(json_body(RerunForm))],
    session: SessionDep,
    store: StoreDep,
    dag: DagDep,
) -> dict[str, Any]:
    """For every window-write task of the DAG: its SQL rendered for the window as a run renders it
    (the DAG's params, the `conf` on top), staged, diffed with production by key (rows added,
    removed, changed, unchanged; per-measure sums before and after; sample keys), dropped. Effect
    tasks: would a rerun send (ledger state). Each task ends with a `verdict` (safe, not safe,
    unverified) and its `reasons`. 422 for a conf the guard or the DAG's params refuse; 503 when
    the API server cannot read the DAG's file or the preview cannot run."""
    return rerun_preview(session, store, dag, form)


@pages.get("/dags/{dag_id}/rerun", dependencies=[READ_RUNS])
def page_rerun(
    request: Request,
    dag_id: str,
    user: UserDep,
    query: Annotated[RerunQuery, Query()],
    session: SessionDep,
) -> HTMLResponse:
    shown = page_data(session, dag_id)
    window = query.window()
    data = {
        "dag_id": dag_id,
        "root": root_path(request),
        "window_start": window.start.isoformat(),
        "window_end": window.end.isoformat(),
        "params": shown["params"],
    }
    return render(
        request,
        "rerun.html",
        title=f"Preview rerun · {dag_id} · {window.label()}",
        dag_id=dag_id,
        window=window,
        params=shown["params"],
        tasks=shown["tasks"],
        data=data,
        csrf=csrf_token(request, user),
        user=user_name(user),
    )

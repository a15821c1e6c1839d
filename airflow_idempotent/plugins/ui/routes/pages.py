"""The pages Airflow's UI shows (external views): run history, a DAG's guarded backfill, one task
instance's window write; and their static files. Not in the OpenAPI document."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from starlette.exceptions import HTTPException

from airflow_idempotent.history.report import DEFAULT_LIMIT, FLAG_CHOICES
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.plugins.ui.backfills import guard_state
from airflow_idempotent.plugins.ui.charts import build_charts
from airflow_idempotent.plugins.ui.datamodels import (
    HISTORY_PARAMS,
    MAX_LIMIT,
    AttemptPageQuery,
    HistoryQuery,
    InputError,
)
from airflow_idempotent.plugins.ui.dependencies import DagDep, SessionDep, StoreDep, store_error
from airflow_idempotent.plugins.ui.history import attempt_data, read_history, read_runs
from airflow_idempotent.plugins.ui.render import STATIC, STATIC_FILES, airflow_root, render, root_path
from airflow_idempotent.plugins.ui.security import (
    READ_RUNS,
    READ_TASK_INSTANCES,
    HistoryUserDep,
    UserDep,
    csrf_token,
    history_scope,
    user_name,
)

router = APIRouter(include_in_schema=False)


def history_page(request: Request, user: Any, store: HistoryStore, dag_id: str | None) -> HTMLResponse:
    """The history page; bad filters are shown on it (422), with nothing read."""
    raw = request.query_params
    errors: list[str] = []
    windows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    charts: list[dict[str, Any]] = []
    status = 200
    query: HistoryQuery | None = None
    allowed: set[str] = set()
    store_problem = None
    try:
        query = HistoryQuery.parse(raw)
    except InputError as err:
        errors = [f"{name}: {message}" for _, name, message in err.problems]
        status = 422
    if query is not None:
        if dag_id is not None:
            query = query.for_dag(dag_id)
        allowed = history_scope(user, query.dag_id)
        try:
            windows = read_history(store, query, allowed)
            runs = read_runs(store, query, allowed)
            charts = build_charts(windows)
        except Exception as err:
            store_problem = store_error(err)
            status = 503
    form = {name: (raw.get(name) or "") for name in HISTORY_PARAMS}
    if status == 422:
        form = dict.fromkeys(form, "")
    if dag_id is not None:
        form["dag_id"] = dag_id
    dag_choices = sorted(allowed)
    return render(
        request,
        "history.html",
        status=status,
        title=f"Run history · {dag_id}" if dag_id else "Run history",
        dag_id=dag_id,
        form=form,
        errors=errors,
        store_problem=store_problem,
        windows=windows,
        runs=runs,
        charts=charts,
        flags=FLAG_CHOICES,
        dag_choices=dag_choices[:500],
        limit=query.limit if query else DEFAULT_LIMIT,
        max_limit=MAX_LIMIT,
        user=user_name(user),
    )


@router.get("/")
def index(request: Request, user: UserDep) -> RedirectResponse:
    return RedirectResponse(f"{root_path(request)}/history", status_code=303)


@router.get("/history", response_class=HTMLResponse)
def page_history(request: Request, user: HistoryUserDep, store: StoreDep) -> HTMLResponse:
    return history_page(request, user, store, None)


@router.get("/dags/{dag_id}/history", dependencies=[READ_RUNS])
def page_dag_history(request: Request, dag_id: str, user: UserDep, store: StoreDep) -> HTMLResponse:
    return history_page(request, user, store, dag_id)


@router.get("/dags/{dag_id}/backfill", dependencies=[READ_RUNS])
def page_backfill(
    request: Request, dag_id: str, user: UserDep, session: SessionDep, store: StoreDep, dag: DagDep
) -> HTMLResponse:
    state = guard_state(session, store, dag)
    today = datetime.now(timezone.utc).date()
    data = {
        "dag_id": dag_id,
        "root": root_path(request),
        "airflow": airflow_root(request),
        "guard": state["guard"],
        "latest_backfill": state["latest_backfill"],
        "default_from": (today - timedelta(days=3)).isoformat(),
        "default_to": (today - timedelta(days=1)).isoformat(),
        "user": user_name(user),
    }
    return render(
        request,
        "backfill.html",
        title=f"Guarded backfill · {dag_id}",
        dag_id=dag_id,
        guard=state["guard"],
        invalid=state["invalid"],
        switches=state["switches"],
        store_problem=state["history_error"],
        data=data,
        csrf=csrf_token(request, user),
        user=user_name(user),
    )


@router.get("/dags/{dag_id}/attempt", dependencies=[READ_TASK_INSTANCES])
def page_attempt(
    request: Request, dag_id: str, user: UserDep, query: Annotated[AttemptPageQuery, Query()], store: StoreDep
) -> HTMLResponse:
    store_problem = None
    data: dict[str, Any] = {"tries": []}
    try:
        data = attempt_data(store, dag_id, query.run_id, query.task_id, query.map_index)
    except Exception as err:
        store_problem = store_error(err)
    return render(
        request,
        "attempt.html",
        status=503 if store_problem else 200,
        title=f"Window write · {query.task_id}",
        dag_id=dag_id,
        run_id=query.run_id,
        task_id=query.task_id,
        map_index=query.map_index,
        tries=data["tries"],
        store_problem=store_problem,
        user=user_name(user),
    )


@router.get("/static/{name}")
def static(name: str, user: UserDep) -> FileResponse:
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        raise HTTPException(404, "Not Found")
    return FileResponse(STATIC / name, media_type=media_type)

"""The read API: run history (all readable DAGs, or one), one task instance's tries, the OpenAPI
document."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.exceptions import HTTPException

from airflow_idempotent.history.report import jsonable
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.plugins.ui.charts import build_charts, chart_json
from airflow_idempotent.plugins.ui.datamodels import (
    MAX_LIMIT,
    AttemptQuery,
    AttemptsResponse,
    DagIdPath,
    HistoryQuery,
    HistoryResponse,
    error_responses,
)
from airflow_idempotent.plugins.ui.dependencies import StoreDep, store_error
from airflow_idempotent.plugins.ui.history import attempt_data, read_history, read_runs
from airflow_idempotent.plugins.ui.security import (
    READ_RUNS,
    READ_TASK_INSTANCES,
    HistoryUserDep,
    UserDep,
    history_scope,
)

router = APIRouter(prefix="/api")

HISTORY_DOC = (
    "Query parameters (all optional, validated; 422 otherwise): `dag_id`, `task_id`, `table` "
    "(table, schema.table or conn_id:table), `from` / `to` (days YYYY-MM-DD, UTC, both "
    f"included), `flag` (nondeterministic, skipped, failed), `limit` (windows, 1-{MAX_LIMIT}, default "
    "50: the newest windows). Answer: `windows` (by table, then window start; each with "
    "`target`, `window`, `flags`, every `writes` entry with ordinal, written_at, run_type, "
    "rows, checksum, fingerprint, dataset_version, semantics, policy_version, `diff` and "
    "`flags`, and `attempts`), `runs` (every DAG run of the DAGs, window writes or not, newest "
    "first: `attempts` events and `tries` with state, duration, host, error) and "
    "`charts` (per measure, then `rows`: each window's total per dataset version)."
)


def history_answer(store: HistoryStore, query: HistoryQuery, allowed: set[str]) -> dict[str, Any]:
    """The history of the `allowed` DAGs as the API answers it (503 when the store cannot be read)."""
    try:
        windows = read_history(store, query, allowed)
        runs = read_runs(store, query, allowed)
    except Exception as err:
        raise HTTPException(503, store_error(err)) from None
    return {
        "filters": query.params(),
        "runs": jsonable(runs),
        "windows": jsonable(windows),
        "charts": [chart_json(c) for c in build_charts(windows)],
    }


@router.get(
    "/history",
    tags=["history"],
    summary="Run history",
    description=HISTORY_DOC,
    response_model=HistoryResponse,
    response_model_exclude_unset=True,
    responses=error_responses(503),
)
def api_history(
    user: HistoryUserDep, query: Annotated[HistoryQuery, Query()], store: StoreDep
) -> dict[str, Any]:
    return history_answer(store, query, history_scope(user, query.dag_id))


@router.get(
    "/dags/{dag_id}/history",
    tags=["history"],
    summary="Run history of one DAG",
    description=HISTORY_DOC,
    dependencies=[READ_RUNS],
    response_model=HistoryResponse,
    response_model_exclude_unset=True,
    responses=error_responses(404, 503),
)
def api_dag_history(
    dag_id: DagIdPath, user: UserDep, query: Annotated[HistoryQuery, Query()], store: StoreDep
) -> dict[str, Any]:
    return history_answer(store, query.for_dag(dag_id), history_scope(user, dag_id))


@router.get(
    "/dags/{dag_id}/attempts",
    tags=["history"],
    summary="One task instance's tries: write, diff, fingerprint",
    dependencies=[READ_TASK_INSTANCES],
    response_model=AttemptsResponse,
    response_model_exclude_unset=True,
    responses=error_responses(404, 503),
)
def api_attempts(
    dag_id: DagIdPath, query: Annotated[AttemptQuery, Query()], store: StoreDep
) -> dict[str, Any]:
    """Query: `run_id`, `task_id`, `map_index` (default -1). Per try: its window writes (every
    recorded field, the parsed `diff` and `fingerprint_parts`) and its attempt events."""
    try:
        data = attempt_data(store, dag_id, query.run_id, query.task_id, query.map_index)
    except Exception as err:
        raise HTTPException(503, store_error(err)) from None
    for entry in data["tries"]:
        for write in entry["writes"]:
            write.pop("fingerprint_parts_text", None)
    return jsonable(data)  # type: ignore[no-any-return]


@router.get(
    "/openapi.json",
    tags=["meta"],
    summary="This API's OpenAPI document",
    response_model=dict[str, Any],
    responses=error_responses(),
)
def api_openapi(request: Request, user: UserDep) -> dict[str, Any]:
    return request.app.openapi()  # type: ignore[no-any-return]

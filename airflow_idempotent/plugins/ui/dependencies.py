"""The FastAPI dependencies the routes share: Airflow's metadata session, the history store, the
path's DAG and backfill (404 when unknown: `require_dag`, which every DAG route's access check
asks), and a JSON body parsed only once the caller is authenticated (its size bounded before
anything reads it, `security.BodyLimit`; its nesting here, before Airflow's audit step or a model
parses it).

Airflow is imported when a route first runs, not when this module is: the plugin that mounts the
app is also loaded by schedulers and workers, which never serve these routes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import cache
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from pydantic_core import from_json
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.plugins.ui.datamodels import BackfillIdPath, DagIdPath

#: Seconds the pages wait for the history store (and for one statement on PostgreSQL).
STORE_TIMEOUT = 10.0
#: The deepest JSON a body may nest (every form is 3 levels deep; Airflow's audit step parses the
#: body with the standard library, which recurses).
MAX_DEPTH = 32


def metadata_session() -> Iterator[Session]:
    """One session of Airflow's metadata database per request, as Airflow's own `SessionDep`:
    committed when the route returns, rolled back when it raises."""
    from airflow.utils.session import create_session

    with create_session(scoped=False) as session:
        yield session


#: Airflow's metadata session for this request (shared by the route and its dependencies).
SessionDep = Annotated[Session, Depends(metadata_session, scope="function")]

_store_lock = threading.Lock()
_stores: dict[str, HistoryStore] = {}


def history_store(request: Request) -> HistoryStore:
    """The history store (connection `idempotent_history`, as the operators use); a test may set
    `app.state.history_store`."""
    override = getattr(request.app.state, "history_store", None)
    if override is not None:
        return override  # type: ignore[no-any-return]
    with _store_lock:
        store = _stores.get("default")
        if store is None:
            store = _stores["default"] = HistoryStore.from_airflow(timeout=STORE_TIMEOUT)
    return store


#: The history store.
StoreDep = Annotated[HistoryStore, Depends(history_store)]


def dag_not_found(dag_id: str) -> HTTPException:
    """The 404 of every DAG route for a DAG the API server does not have."""
    return HTTPException(
        404,
        f"DAG {dag_id} not found: check the DAG id (case matters) and that Airflow has parsed the "
        "DAG's file (the DAG is in Airflow's DAG list, without an import error)",
    )


def require_dag(session: Session, dag_id: str) -> None:
    """404 unless the API server has the DAG: a serialized DAG of that id, as `load_dag` reads it.

    Every route with a DAG in its path asks this once the caller's access to that DAG passed
    (`security.dag_access`), so only a caller allowed on the DAG can tell an unknown DAG from one
    they may not reach: anyone else gets the same 403 for both."""
    import sqlalchemy as sa
    from airflow.models.serialized_dag import SerializedDagModel

    if not session.scalar(sa.select(sa.exists().where(SerializedDagModel.dag_id == dag_id))):
        raise dag_not_found(dag_id)


def load_dag(session: Session, dag_id: str) -> Any:
    """The DAG as the API server has it (serialized), or 404."""
    from airflow.models.serialized_dag import SerializedDagModel

    serdag = session.scalar(SerializedDagModel.latest_item_select_object(dag_id))
    if serdag is None:  # removed since `require_dag` found it
        raise dag_not_found(dag_id)
    return serdag.dag


def path_dag(dag_id: DagIdPath, session: SessionDep) -> Any:
    """The path's DAG, looked up once its access dependency passed (and found it: `require_dag`)."""
    return load_dag(session, dag_id)


#: The path's DAG, serialized (404 when the API server does not have it).
DagDep = Annotated[Any, Depends(path_dag)]


def get_backfill(session: Session, dag_id: str, backfill_id: int) -> Any:
    """The backfill with this id *of this DAG* (the path's DAG is what access was checked on)."""
    import sqlalchemy as sa
    from airflow.models.backfill import Backfill

    backfill = session.scalar(
        sa.select(Backfill).where(Backfill.id == backfill_id, Backfill.dag_id == dag_id)
    )
    if backfill is None:
        raise HTTPException(404, "Backfill not found")
    return backfill


def path_backfill(dag_id: DagIdPath, backfill_id: BackfillIdPath, session: SessionDep) -> Any:
    """The path's backfill of the path's DAG, so no route can read another DAG's backfill."""
    return get_backfill(session, dag_id, backfill_id)


#: The path's Airflow backfill (404 unless it belongs to the path's DAG).
BackfillDep = Annotated[Any, Depends(path_backfill)]


def store_error(err: BaseException) -> str:
    """What a page or answer says when the history store cannot be read (details in the log)."""
    return (
        f"the history store cannot be read ({type(err).__name__}): check the connection "
        "idempotent_history and the API server's log"
    )


def nesting_depth(document: Any) -> int:
    """How deep `document` nests objects and arrays (a scalar: 0), without recursing."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _body_error(message: str, kind: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body",), "msg": message, "type": kind}])


async def json_document(request: Request) -> Any:
    """The body as a JSON document (an empty body is ``{}``), parsed once per request by pydantic's
    parser (no Python recursion): 422 when it is not JSON or nests deeper than MAX_DEPTH. What the
    audit step and the body's model may then read safely."""
    raw = await request.body()
    try:
        document = from_json(raw or b"{}")
    except ValueError as err:
        raise _body_error(f"Invalid JSON: {err}", "json_invalid") from None
    if nesting_depth(document) > MAX_DEPTH:
        raise _body_error(f"the body nests deeper than {MAX_DEPTH} levels", "json_too_deep")
    return document


#: The request's JSON document (see `json_document`).
JsonDocumentDep = Annotated[Any, Depends(json_document)]


@cache
def json_body(model: type[BaseModel]) -> Callable[..., Any]:
    """A dependency parsing the JSON body into `model` *after* the auth and CSRF dependencies
    (FastAPI would otherwise parse a declared body before any dependency runs), and after
    `json_document` bounded it."""

    async def parse(request: Request, document: JsonDocumentDep) -> Any:
        raw = await request.body()
        try:
            return model.model_validate_json(raw or b"{}")
        except ValidationError as err:
            raise RequestValidationError(
                [
                    {"loc": ("body", *e["loc"]), "msg": e["msg"], "type": e["type"]}
                    for e in err.errors(include_input=False, include_url=False)
                ]
            ) from None

    parse.__name__ = f"json_body_{model.__name__}"
    return parse


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route whose body `json_body(model)` parses."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}},
        }
    }

"""The FastAPI app Airflow's API server mounts at /idempotent, and the plugin's registration of it
(`FASTAPI_APPS`, read by `IdempotentPlugin` in plugins/listener.py when the API server asks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from airflow_idempotent import __version__
from airflow_idempotent.plugins.ui.datamodels import BODY_MODELS, MAX_BODY, json_schema_patterns
from airflow_idempotent.plugins.ui.dependencies import MAX_DEPTH
from airflow_idempotent.plugins.ui.render import URL_PREFIX, error_response
from airflow_idempotent.plugins.ui.routes import api, backfills, pages, rerun
from airflow_idempotent.plugins.ui.security import SECURITY_HEADERS, BodyLimit

API_DESCRIPTION = f"""\
The JSON API of airflow-idempotent's pages in the Airflow UI, mounted in Airflow's API server
under `/idempotent`. Authenticate as for Airflow's own REST API: `Authorization: Bearer <JWT>`
(from `POST /auth/token`), or the UI's session cookie. Every route needs a logged-in user (401)
with access to the DAG it names (403): history and status GET on the DAG's runs, attempts GET
on its task instances, preview, create and the rerun preview POST on its runs, stop and clear
PUT on its runs.
POST bodies are JSON (415 otherwise), at most {MAX_BODY:,} bytes (413, before anything reads
them) and nested at most {MAX_DEPTH} levels (422); a browser session (cookie) must also send the
page's `X-Idempotent-CSRF` token, which ends with the session it was issued to. Errors:
`{{"detail": "<message>"}}` or, for invalid input, `{{"detail": [{{"loc", "msg", "type"}}]}}` (422,
nothing is done); every status a route can answer is listed with it.
"""


def create_app() -> FastAPI:
    """The app: the routers, security headers on every answer, errors as pages or JSON, and an
    OpenAPI document that only a logged-in user can read (no /docs)."""
    app = FastAPI(
        title="airflow-idempotent UI API",
        version=__version__,
        description=API_DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    app.add_middleware(BodyLimit)  # inside the headers' middleware, so its 413 gets them too

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return error_response(request, exc.status_code, exc.detail, getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> Response:
        # Starlette answers this outside every middleware (then re-raises, so the server logs the
        # traceback): the headers are added here, and no exception text is shown.
        return error_response(
            request, 500, "internal server error: see the API server's log", SECURITY_HEADERS
        )

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        detail = (
            [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errors]
            if isinstance(errors, Sequence) and not isinstance(errors, str)
            else str(errors)
        )
        return error_response(request, 422, detail)

    for module in (api, backfills, pages):
        app.include_router(module.router)
    app.include_router(rerun.router)
    app.include_router(rerun.pages)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in BODY_MODELS:
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(model_schema.pop("$defs", {}))
            components[model.__name__] = model_schema
        json_schema_patterns(schema)  # the routes' Python patterns, as JSON Schema reads them
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


app = create_app()

#: `AirflowPlugin.fastapi_apps` entry: mounted at /idempotent by Airflow's API server.
FASTAPI_APPS: list[dict[str, Any]] = [{"app": app, "url_prefix": URL_PREFIX, "name": "airflow-idempotent UI"}]

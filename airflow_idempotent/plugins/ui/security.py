"""Who may do what: Airflow's own authentication and DAG access, the CSRF token, security headers,
the body limit, and Airflow's audit log for state changes.

Airflow's security modules are imported when a route first runs (the plugin is also loaded by
schedulers and workers, which never serve these routes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlparse

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from airflow_idempotent.plugins.ui.datamodels import DAG_ID_RE, MAX_BODY, NOT_A_DAG_ID, InputError
from airflow_idempotent.plugins.ui.dependencies import JsonDocumentDep, SessionDep, require_dag

CSRF_HEADER = "X-Idempotent-CSRF"
CSRF_SALT = "airflow-idempotent-ui-csrf"
CSRF_MAX_AGE = 12 * 3600

#: Every answer's headers: scripts and styles from this app only, framing by Airflow's origin.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_bearer = HTTPBearer(auto_error=False)


async def current_user(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Any:
    """The caller, exactly as Airflow's API authenticates it (`security.get_user`)."""
    from airflow.api_fastapi.core_api.security import get_user

    return await get_user(request, _oauth_token=None, bearer_credentials=credentials)


#: The authenticated caller (401 without credentials, 403 for an invalid token).
UserDep = Annotated[Any, Depends(current_user)]


def dag_access(method: str, entity: str) -> Callable[..., Any]:
    """Airflow's `requires_access_dag(method, entity)` for the DAG in the path (or ?dag_id=).

    Every DAG route depends on it, so the path's DAG id is validated here, before access is asked,
    and the path's DAG must exist after it was granted (`require_dag`: 404 naming the DAG). Access
    first: a caller who may not reach the DAG gets Airflow's 403 whether it exists or not (FAB and
    the other per-DAG auth managers refuse an unknown DAG's id like any other they do not grant).
    A ?dag_id= filter (the nav history) is a filter, not a DAG route: an unknown one matches nothing.
    """

    def check(request: Request, user: UserDep, session: SessionDep) -> Any:
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
        from airflow.api_fastapi.core_api.security import requires_access_dag

        # Not a DAG id at all (e.g. a NUL byte the database would choke on): 422 before asking.
        where = "path" if "dag_id" in request.path_params else "query"
        dag_id = request.path_params.get("dag_id") or request.query_params.get("dag_id")
        if dag_id is not None and not DAG_ID_RE.fullmatch(dag_id):
            raise InputError([(where, "dag_id", NOT_A_DAG_ID)])
        requires_access_dag(method, DagAccessEntity[entity])(request, user)  # type: ignore[arg-type]
        if where == "path" and dag_id is not None:
            require_dag(session, dag_id)
        return user

    check.__name__ = f"requires_access_dag_{method.lower()}_{entity.lower()}"
    return check


def history_access(request: Request, user: UserDep, session: SessionDep) -> Any:
    """The nav history page: a DAG filter needs access to that DAG's runs; without one, the user
    sees the DAGs whose runs they may read (`history_scope`)."""
    if request.query_params.get("dag_id"):
        return dag_access("GET", "RUN")(request, user, session)
    return user


#: The caller of the nav history (its ?dag_id=, if any, checked like a DAG route's).
HistoryUserDep = Annotated[Any, Depends(history_access)]


def readable_dag_ids(user: Any) -> set[str]:
    """The DAGs whose runs `user` may read, as Airflow's auth manager answers for each: the DAGs it
    may read (`get_authorized_dag_ids`), each kept only if it may also read that DAG's runs (what
    every DAG route of the history asks: `requires_access_dag("GET", RUN)`). A user granted a DAG
    but not its runs (FAB: `can_read` on `DAG:<id>` without `can_read` on `DAG Runs`) sees none of
    its history here, as Airflow shows them none of its runs."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.models.dag import DagModel

    manager = get_auth_manager()
    dag_ids = set(manager.get_authorized_dag_ids(user=user, method="GET"))
    if not dag_ids:
        return set()
    teams = DagModel.get_dag_id_to_team_name_mapping(sorted(dag_ids))
    return {
        dag_id
        for dag_id in dag_ids
        if manager.is_authorized_dag(
            method="GET",
            access_entity=DagAccessEntity.RUN,
            details=DagDetails(id=dag_id, team_name=teams.get(dag_id)),
            user=user,
        )
    }


def history_scope(user: Any, dag_id: str | None) -> set[str]:
    """The DAGs whose writes, attempts and effects a history answer may show: those whose runs the
    user may read (plus the DAG it names, whose access the route's dependency checked), in every path. A
    window two DAGs wrote is shown with only the readable DAG's part. 403 when there are none."""
    allowed = readable_dag_ids(user) | ({dag_id} if dag_id is not None else set())
    if not allowed:
        raise HTTPException(403, "Forbidden")
    return allowed


def user_name(user: Any) -> str:
    """The caller's name as pages and kill switches show it."""
    try:
        return str(user.get_name())
    except Exception:
        return "unknown"


def _signer() -> Any:
    from airflow.api_fastapi.auth.tokens import get_signing_key
    from itsdangerous import URLSafeTimedSerializer

    return URLSafeTimedSerializer(get_signing_key("api", "secret_key"), salt=CSRF_SALT)


def _bearer_authenticated(request: Request) -> bool:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(credentials.strip())


def session_claims(request: Request) -> dict[str, Any]:
    """The claims of the Airflow token this request was authenticated with (as `get_user` chooses
    it: a Bearer header, else the UI's cookie). Read without checking the signature: `get_user`
    checked it in this request, before any route runs."""
    import jwt
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    if _bearer_authenticated(request):
        token = request.headers["authorization"].partition(" ")[2].strip()
    else:
        token = request.cookies.get(COOKIE_NAME_JWT_TOKEN, "")
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}
    return claims if isinstance(claims, dict) else {}


def csrf_token(request: Request, user: Any) -> str:
    """The token a page embeds for its POSTs: signed, bound to the user and to the session (the
    Airflow token, by its id `jti`) the page was opened in; valid CSRF_MAX_AGE, and never after
    that session ends (Airflow's logout revokes it, or it expires)."""
    claims = session_claims(request)
    return str(
        _signer().dumps({"user": str(user.get_id()), "jti": claims.get("jti"), "exp": claims.get("exp")})
    )


def _session_ended(subject: dict[str, Any]) -> bool:
    """The session a CSRF token was issued to is over: revoked (logout), expired, or unknown."""
    import time

    from airflow.models.revoked_token import RevokedToken

    jti, exp = subject.get("jti"), subject.get("exp")
    if not isinstance(jti, str) or not jti or not isinstance(exp, int | float) or exp < time.time():
        return True
    return bool(RevokedToken.is_revoked(jti))


def _same_origin(request: Request, origin: str) -> bool:
    if origin == "null":
        return False
    host = urlparse(origin).netloc.lower()
    allowed = {request.headers.get("host", "").lower()}
    from airflow.configuration import conf

    base_url = conf.get("api", "base_url", fallback="") or ""
    if base_url:
        allowed.add(urlparse(base_url).netloc.lower())
    return bool(host) and host in allowed


async def csrf_protect(request: Request, user: UserDep) -> None:
    """Refuse a state-changing request a browser could have been tricked into sending."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise HTTPException(415, "send the body as application/json")
    if request.headers.get("sec-fetch-site", "same-origin").lower() not in ("same-origin", "none"):
        raise HTTPException(403, "cross-site request refused")
    origin = request.headers.get("origin")
    if origin is not None and not _same_origin(request, origin):
        raise HTTPException(403, "cross-origin request refused")
    if _bearer_authenticated(request):
        return  # a script's explicit credential: no browser sends it on its own
    token = request.headers.get(CSRF_HEADER)
    if not token:
        raise HTTPException(403, f"missing {CSRF_HEADER} header: reload the page and try again")
    from itsdangerous import BadSignature

    try:
        subject = _signer().loads(token, max_age=CSRF_MAX_AGE)
    except BadSignature:
        raise HTTPException(403, "invalid or expired CSRF token: reload the page and try again") from None
    if not isinstance(subject, dict) or subject.get("user") != str(user.get_id()):
        raise HTTPException(403, "the CSRF token belongs to another user: reload the page")
    if _session_ended(subject):
        raise HTTPException(403, "the session this page was opened in has ended: reload the page")


class BodyTooLarge(HTTPException):
    """A request body over MAX_BODY (413)."""

    def __init__(self) -> None:
        super().__init__(413, f"request body too large (at most {MAX_BODY:,} bytes)")


class BodyLimit:
    """ASGI middleware: a body over MAX_BODY is refused with 413 before anything reads it, so no
    parser and no audit log ever sees it. A declared Content-Length over the limit is answered at
    once (nothing is read, not even the credentials checked); a chunked body as soon as what has
    arrived passes the limit."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
            from airflow_idempotent.plugins.ui.render import error_response

            exc = BodyTooLarge()
            response = error_response(Request(scope), exc.status_code, exc.detail, SECURITY_HEADERS)
            await response(scope, receive, send)
            return
        received = 0

        async def bounded() -> Any:
            nonlocal received
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > MAX_BODY:
                    raise BodyTooLarge()
            return message

        await self.app(scope, bounded, send)


def audit(event: str) -> Callable[..., Any]:
    """Airflow's audit log entry (`action_logging`, the Event Log page) for a state change, once the
    body is known to be bounded JSON (`json_document`: Airflow's logger parses it again, with the
    standard library); a body refused before that (413, 422) is not logged.

    Committed at once, so the Event Log shows the attempt even when the action is then refused.
    """

    async def log(request: Request, user: UserDep, session: SessionDep, document: JsonDocumentDep) -> None:
        from airflow.api_fastapi.logging.decorators import action_logging

        await action_logging(event)(request, session, user)
        session.commit()

    log.__name__ = f"audit_{event}"
    return log


# What each route needs, as Airflow's own routes for the same action: reading history and
# backfill status GET on the DAG's runs, an attempt GET on its task instances, preview, create
# and the rerun preview (it stages a temporary table) POST on its runs (Airflow's dry run and
# create), stop and clear PUT (Airflow's pause).
READ_RUNS = Depends(dag_access("GET", "RUN"))
CREATE_RUNS = Depends(dag_access("POST", "RUN"))
EDIT_RUNS = Depends(dag_access("PUT", "RUN"))
READ_TASK_INSTANCES = Depends(dag_access("GET", "TASK_INSTANCE"))
#: Every state-changing route: a JSON POST that no other site made the browser send.
CSRF = Depends(csrf_protect)

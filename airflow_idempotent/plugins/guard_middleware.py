"""The backfill guard where a backfill is created: in front of Airflow's REST API.

`POST /api/v2/backfills` (the UI's backfill dialog, airflowctl and any REST client) and
`POST /api/v2/backfills/dry_run` pass through `BackfillGuardMiddleware`, a plain ASGI middleware
installed by the `IdempotentPlugin` (`fastapi_root_middlewares`). For a DAG that declares an
`idempotent_guard` param it refuses, with HTTP 422 and `{"detail": "<what to fix>"}` (the shape
Airflow's UI shows in the dialog), before Airflow creates anything:

* a request whose DAG run conf does not declare its rerun semantics (`BackfillIntent.from_conf`);
* more windows than the DAG's cap, unless `approve_windows` in the conf is exactly that count;
* any window that has not closed yet at the request's wall clock;
* a guarded request that cannot be evaluated (a body Airflow's model rejects, a window whose
  width is unknown, a DAG whose guard declaration is invalid).

The decision is the guard's (`airflow_idempotent.guard.backfills`): the windows Airflow will
create runs for, each read as the DAG's tasks read it, so the count in the message is the count
the UI's dialog shows and `"approve_windows": N` approves exactly it.

Everything else passes through untouched, its body replayed byte for byte: other routes and
methods, unguarded DAGs, bodies without a string dag_id or that are not JSON (Airflow answers
them itself), requests Airflow refuses on its own (unknown DAG, future-only range, from_date after
to_date, a non-periodic schedule, a conf that fails the DAG's params), and callers Airflow will
refuse (401/403: the guard never tells an unauthenticated caller anything about a DAG).

A dry run without a DAG run conf (the UI's dialog sends none while the dates are edited) is
checked only for open windows: the cap depends on the conf's approval, which the create request
carries. Failing that dry run would also disable the dialog's Run button (it needs a count > 0).

If the guard itself cannot decide (the metadata database does not answer), it answers 503 and
lets nothing through: a guard that opens when it breaks is not a guard.

The CLI `airflow backfill create` does not go through the API server (it calls Airflow's
`_create_backfill` in-process), so only the checks inside every guarded task see it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from datetime import datetime
from typing import Any

from airflow_idempotent.guard.backfills import airflow_decide
from airflow_idempotent.guard.errors import GuardRefusal

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The routes the guard answers, relative to the API's root path: route -> is it a dry run.
BACKFILL_ROUTES = {"/api/v2/backfills": False, "/api/v2/backfills/dry_run": True}
#: HTTP status of a refusal: what Airflow itself answers for a backfill request it cannot accept.
REFUSED = 422
#: HTTP status when the guard cannot decide (it fails closed).
UNAVAILABLE = 503


async def airflow_caller(scope: Scope) -> Any | None:
    """The user Airflow will authenticate this request as (Bearer header first, then the UI's
    cookie, exactly as its `get_user`), or None when Airflow will answer 401/403 itself."""
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
    from airflow.api_fastapi.core_api.security import resolve_user_from_token
    from fastapi import HTTPException
    from starlette.requests import Request

    request = Request(scope)
    token: str | None = None
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials:
        token = credentials
    else:
        token = request.cookies.get(COOKIE_NAME_JWT_TOKEN)
    try:
        return await resolve_user_from_token(token)
    except HTTPException:
        return None


# --------------------------------------------------------------------------------------------
# The ASGI middleware.
# --------------------------------------------------------------------------------------------

Authenticate = Callable[[Scope], Awaitable[Any | None]]
Decide = Callable[[str, Mapping[str, Any], bool, datetime, Scope, Any], "GuardRefusal | None"]


def backfill_route(scope: Scope) -> bool | None:
    """For a POST to a guarded route: whether it is the dry run; otherwise None."""
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return None
    path: str = scope.get("path", "")
    root = (scope.get("root_path") or "").rstrip("/")
    if root and path.startswith(root + "/"):
        path = path[len(root) :]
    return BACKFILL_ROUTES.get(path.rstrip("/") or "/")


class BackfillGuardMiddleware:
    """Answers guarded backfill requests the guard refuses; hands everything else on unchanged.

    `authenticate` and `decide` default to Airflow's (see `airflow_caller`, `airflow_decide`);
    tests pass their own. `decide` runs in a worker thread: it reads the metadata database.
    """

    def __init__(
        self,
        app: ASGIApp,
        authenticate: Authenticate | None = None,
        decide: Decide | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.app = app
        self.authenticate = authenticate or airflow_caller
        self.decide = decide or airflow_decide
        self.clock = clock or _utcnow

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        dry_run = backfill_route(scope)
        if dry_run is None:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:  # the client went away before sending its body
            return
        replay = _replay(body, receive)
        try:
            status, message = await self.check(scope, body, dry_run)
        except Exception as err:
            log.exception("backfill guard: could not check %s %s", scope.get("method"), scope.get("path"))
            status, message = (
                UNAVAILABLE,
                f"the backfill guard could not check this request ({type(err).__name__}: {err}); nothing "
                "was created. Retry; if it persists, see the API server's log.",
            )
        if status is None:
            await self.app(scope, replay, send)
            return
        await _respond(send, status, message or "")

    async def check(self, scope: Scope, body: bytes, dry_run: bool) -> tuple[int | None, str | None]:
        """(None, None) to pass the request on, else (status, message) to answer it with."""
        try:
            payload = json.loads(body)
        except ValueError:  # not JSON (or not UTF-8): Airflow answers 422 itself
            return None, None
        dag_id = payload.get("dag_id") if isinstance(payload, dict) else None
        if not isinstance(dag_id, str):
            return None, None  # Airflow answers 400/422 itself
        user = await self.authenticate(scope)
        if user is None:
            return None, None  # Airflow answers 401/403 itself
        import anyio.to_thread

        now = self.clock()
        refusal = await anyio.to_thread.run_sync(
            lambda: self.decide(dag_id, payload, dry_run, now, scope, user)
        )
        if refusal is None:
            return None, None
        log.info(
            "backfill guard refused a %s of DAG %s by %s: %s",
            "dry run" if dry_run else "backfill",
            dag_id,
            _name(user),
            refusal,
        )
        return REFUSED, str(refusal)


def _name(user: Any) -> str:
    try:
        return str(user.get_name())
    except Exception:
        return str(user)


def _utcnow() -> datetime:
    from airflow._shared.timezones import timezone

    return timezone.utcnow()


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands on the whole body once, then whatever the client sends next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _respond(send: Send, status: int, message: str) -> None:
    payload = json.dumps({"detail": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload, "more_body": False})


__all__ = ["BACKFILL_ROUTES", "BackfillGuardMiddleware", "airflow_caller"]

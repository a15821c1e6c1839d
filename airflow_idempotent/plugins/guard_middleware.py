"""The backfill guard's friendly answer in front of Airflow's REST API (and its dry run's verdict).

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

The caller is resolved by Airflow's own code (`HTTPBearer` + `get_user`): every credential form
Airflow accepts (any case of `Bearer`, then a space, extra whitespace around the token, the UI's
`_token` cookie) gets the guard's verdict, and a form Airflow refuses is left to Airflow's 401/403.

Bodies are bounded before anything else (no parsing, no authentication): a Content-Length or a
streamed body over MAX_BODY (64 KB) is a 413, JSON nested deeper than MAX_DEPTH a 422.

This middleware is not the line that holds: the guard is enforced where every backfill comes
into existence, Airflow's ORM (`airflow_idempotent.guard.enforce`, installed in every Airflow
process), so `airflow backfill create`, a future route and any client are refused with the same
message and nothing created; and inside every guarded task (`guard.sizes`). The middleware gives
the UI's dialog its 422 and the dry run its verdict.
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
#: HTTP status of a body over MAX_BODY.
TOO_LARGE = 413
#: The largest body the guard's routes accept (a backfill request is a few hundred bytes).
MAX_BODY = 64 * 1024
#: The deepest JSON nesting the guard's routes accept (the body is 2 deep, a conf's thresholds 4).
MAX_DEPTH = 64


async def airflow_caller(scope: Scope) -> Any | None:
    """The user Airflow will authenticate this request as, or None when Airflow answers 401/403.

    Airflow's own resolution, called rather than copied: its `HTTPBearer` reads the Authorization
    header (scheme case-insensitive, split from the token at the first space, the token stripped
    of surrounding whitespace: `Bearer`, a space, then spaces or tabs authenticates; `Bearer` and
    a tab without the space does not, Airflow answers 401), and `get_user` prefers it to the
    UI's `_token` cookie, exactly as every route of Airflow's REST API does.
    """
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user
    from fastapi import HTTPException
    from starlette.requests import Request

    request = Request(scope)
    try:
        credentials = await bearer_scheme(request)
        return await get_user(request, None, credentials)
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
        # Bounded before anything else (no parsing, no authentication, no audit log): the
        # declared length first, then the body as it streams in, cut at the limit.
        if declared_length(scope) > MAX_BODY:
            await _respond(send, TOO_LARGE, too_large())
            return
        body = await _read_body(receive, MAX_BODY)
        if body is None:  # the client went away before sending its body
            return
        if len(body) > MAX_BODY:
            await _respond(send, TOO_LARGE, too_large())
            return
        if nesting_exceeds(body, MAX_DEPTH):
            await _respond(
                send,
                REFUSED,
                f"the request body nests JSON deeper than {MAX_DEPTH} levels; a backfill request is a "
                "flat object with a small conf: send that.",
            )
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


def declared_length(scope: Scope) -> int:
    """The request's Content-Length (0 when absent or not a number: the stream is bounded anyway)."""
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def too_large() -> str:
    """The 413's detail."""
    return (
        f"the request body is larger than {MAX_BODY // 1024} KB; a backfill request is a few hundred bytes."
    )


def nesting_exceeds(body: bytes, limit: int) -> bool:
    """Whether the JSON text `body` nests arrays/objects deeper than `limit`, scanned without parsing
    (Python's parser raises RecursionError on deep input, which must never reach a request)."""
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The body, or its first chunks once they exceed `limit` bytes (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit or not message.get("more_body", False):
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


__all__ = [
    "BACKFILL_ROUTES",
    "MAX_BODY",
    "MAX_DEPTH",
    "BackfillGuardMiddleware",
    "airflow_caller",
    "nesting_exceeds",
]

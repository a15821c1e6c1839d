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

The windows are the ones Airflow will create runs for: Airflow's own backfill info list
(`_get_info_list`: the DAG's timetable between from_date and to_date, closed data intervals only,
run_backwards), minus the windows Airflow skips under the request's reprocess_behavior (the same
query and rule Airflow's dry run uses). So the count in the message is the count the UI's dialog
shows ("this backfill will trigger N runs"), and `"approve_windows": N` approves exactly it.

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
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_idempotent.errors import WindowError
from airflow_idempotent.guard import (
    CONF_KEYS,
    GUARD_PARAM,
    BackfillIntent,
    GuardConfig,
    GuardRefusal,
    check_scope,
)

if TYPE_CHECKING:
    from airflow.models.backfill import ReprocessBehavior
    from airflow.timetables.base import DagRunInfo

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The routes the guard answers, relative to the API's root path: route -> is it a dry run.
BACKFILL_ROUTES = {"/api/v2/backfills": False, "/api/v2/backfills/dry_run": True}
#: A guarded backfill over more windows than this is refused without looking up each window's
#: existing run (one query each, as Airflow does): split it.
MAX_WINDOWS = 10_000
#: HTTP status of a refusal: what Airflow itself answers for a backfill request it cannot accept.
REFUSED = 422
#: HTTP status when the guard cannot decide (it fails closed).
UNAVAILABLE = 503

#: `will_run(info, reprocess_behavior)`: False for a window Airflow skips (its run exists).
WillRun = Callable[["DagRunInfo", "ReprocessBehavior"], bool]


# --------------------------------------------------------------------------------------------
# The decision: a pure function of the request body, the DAG and the clock.
# --------------------------------------------------------------------------------------------


def guard_of(dag: Any) -> GuardConfig | None:
    """The guard `dag` declares (its declared param default), None if unguarded.

    A DAG that has the param but an invalid value is guarded all the same: its backfills are
    refused with the reason (GuardRefusal) rather than let through unchecked.
    """
    params = getattr(dag, "params", None)
    if not params or GUARD_PARAM not in params:
        return None
    try:
        config = GuardConfig.of_params(params)
    except (GuardRefusal, TypeError, ValueError) as err:
        raise GuardRefusal(
            f"this DAG's {GUARD_PARAM} param is invalid ({err}): fix the DAG file; until then its "
            "backfills are refused."
        ) from None
    if config is None:
        raise GuardRefusal(
            f"this DAG's {GUARD_PARAM} param is not a guard declaration: declare it with "
            f"params={{**GuardConfig(cap=...).param()}}; until then its backfills are refused."
        )
    return config


def intent_conf(conf: Mapping[str, Any], declared_params: Collection[str]) -> dict[str, Any]:
    """The conf without the DAG's own declared params.

    Airflow's backfill dialog pre-fills the conf with every param of the DAG (including the
    read-only `idempotent_guard`), and Airflow validates those against the DAG itself; they are
    not part of what the backfill declares.
    """
    return {k: v for k, v in conf.items() if k not in declared_params or k in CONF_KEYS}


def window_end(info: DagRunInfo, granularity: str | None) -> datetime:
    """Where the window a run of `info` writes ends, as the operators compute it.

    The data interval's end when it has width; otherwise the end of the `granularity` period
    starting at (containing) the logical date, or the partition date for a partitioned run.
    """
    from airflow_idempotent import window as windows

    interval = info.data_interval
    if interval is not None and interval.end > interval.start:
        return windows._coerce_instant(interval.end, "data_interval_end")
    unit = windows.parse_granularity(granularity)
    if unit is None:
        raise WindowError(
            "a run's data interval has no width and the DAG's guard declares no granularity, so a "
            "window's end is unknown: declare it, e.g. GuardConfig(granularity='day')"
        )
    instant = info.logical_date if info.logical_date is not None else info.partition_date
    if instant is None:
        if info.partition_key is None:
            raise WindowError("a run has neither a logical date nor a partition: it has no window")
        instant = windows._parse_partition_key(info.partition_key, "UTC")
    start = windows._coerce_instant(instant, "logical_date")
    return windows._period(start, unit, windows._zone("UTC"), "start")[1]


def serialized_dag(dag: Any) -> Any:
    """Airflow's scheduler-side DAG (what the API server loads): `dag` itself, or its
    serialization when it is an authoring (task SDK) DAG, e.g. one built in a test."""
    if hasattr(dag, "iter_dagrun_infos_between"):
        return dag
    from airflow.serialization.serialized_objects import DagSerialization

    return DagSerialization.from_dict(DagSerialization.to_dict(dag))


def evaluate_backfill_request(
    body: Mapping[str, Any],
    dag: Any,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    will_run: WillRun | None = None,
) -> GuardRefusal | None:
    """The guard's answer to a backfill request: a refusal saying what to fix, or None to let it through.

    `body` is the request's JSON (Airflow's BackfillPostBody), `dag` the DAG it names (serialized
    or authoring). `now` is the request's wall clock (default: now). `will_run` tells which of
    the range's windows Airflow will actually (re)run under the request's reprocess_behavior; by
    default all of them. None also means "Airflow refuses this request itself": the guard leaves
    Airflow's own validation and messages alone.
    """
    from airflow._shared.timezones import timezone
    from airflow.api_fastapi.core_api.datamodels.backfills import BackfillPostBody
    from airflow.exceptions import AirflowException
    from airflow.models.backfill import ReprocessBehavior, _get_info_list, _validate_backfill_params
    from airflow.utils.types import DagRunType
    from pydantic import ValidationError

    try:
        config = guard_of(dag)
    except GuardRefusal as refusal:
        return refusal
    if config is None:
        return None
    try:
        request = BackfillPostBody.model_validate(dict(body))
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in err.errors()
        )
        return _unevaluable(f"the request body is not a valid backfill request ({problems})")
    dag = serialized_dag(dag)
    from_date = timezone.coerce_datetime(request.from_date)
    to_date = timezone.coerce_datetime(request.to_date)
    behavior = ReprocessBehavior(request.reprocess_behavior)

    # What Airflow refuses on its own, it answers itself (same checks, same order as its route).
    if not dag.timetable.periodic:
        return None
    if dag.allowed_run_types is not None and DagRunType.BACKFILL_JOB not in dag.allowed_run_types:
        return None
    try:
        _validate_backfill_params(
            dag, request.run_backwards, from_date, to_date, behavior, request.dag_run_conf
        )
    except AirflowException:
        return None

    conf = request.dag_run_conf
    intent: BackfillIntent | None = None
    if not (dry_run and conf is None):
        try:
            intent = BackfillIntent.from_conf(
                intent_conf(conf, set(dag.params)) if isinstance(conf, Mapping) else conf
            )
        except GuardRefusal as refusal:
            return refusal

    try:
        infos = _get_info_list(from_date=from_date, to_date=to_date, reverse=request.run_backwards, dag=dag)
    except Exception as err:
        return _unevaluable(f"the DAG's timetable failed ({type(err).__name__}: {err})")
    if not infos:
        return None  # Airflow answers "no runs to create" itself
    if len(infos) > MAX_WINDOWS:
        return GuardRefusal(
            f"this backfill covers {len(infos)} windows, more than the guard evaluates in one request "
            f"({MAX_WINDOWS}) and far over the DAG's cap of {config.cap}: split it into backfills of at "
            f"most {config.cap} windows."
        )
    if will_run is not None:
        infos = [info for info in infos if will_run(info, behavior)]
        if not infos:
            return None  # every window already has its run: Airflow rewrites nothing
    try:
        ends = [window_end(info, config.granularity) for info in infos]
    except WindowError as err:
        return _unevaluable(str(err))
    if intent is None:
        # A dry run without conf: the approval it would need is unknown, so only the windows'
        # closing is checked (an approval of exactly this count puts the cap aside).
        intent = BackfillIntent(semantics="replay", reason="dry run", approve_windows=len(ends))
    try:
        check_scope(config, intent, ends, now or timezone.utcnow())
    except GuardRefusal as refusal:
        return refusal
    return None


def _unevaluable(reason: str) -> GuardRefusal:
    return GuardRefusal(
        f"this DAG is guarded by airflow-idempotent and its backfill request could not be checked: "
        f"{reason}. Nothing was created."
    )


# --------------------------------------------------------------------------------------------
# The same decision inside Airflow's API server: DAG from the metadata DB, caller from its auth.
# --------------------------------------------------------------------------------------------


def airflow_will_run(session: Any, dag_id: str) -> WillRun:
    """Airflow's own rule for which windows a backfill (re)runs: its latest run for the window, if
    any, and the reprocess behavior (the query and rule its dry run and create use)."""
    from airflow.models.backfill import _get_dag_run_no_create_reason, _get_latest_dag_run_row_query

    def will_run(info: DagRunInfo, behavior: ReprocessBehavior) -> bool:
        run = session.scalar(_get_latest_dag_run_row_query(dag_id=dag_id, info=info))
        return run is None or _get_dag_run_no_create_reason(run, behavior) is None

    return will_run


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


def airflow_decide(
    dag_id: str, body: Mapping[str, Any], dry_run: bool, now: datetime, scope: Scope, user: Any
) -> GuardRefusal | None:
    """Load `dag_id` as Airflow's backfill route does, then decide; runs in a worker thread."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from fastapi import HTTPException
    from starlette.requests import Request

    with create_session(scoped=False) as session:
        serdag = session.scalar(SerializedDagModel.latest_item_select_object(dag_id))
        if serdag is None:
            return None  # Airflow answers 404
        dag = serdag.dag
        if GUARD_PARAM not in (dag.params or {}):
            return None
        try:  # the caller may create backfills of this DAG, or Airflow answers 403 itself
            requires_access_dag("POST", DagAccessEntity.RUN, dag_id)(Request(scope), user)
        except HTTPException:
            return None
        will_run = airflow_will_run(session, dag_id)
        return evaluate_backfill_request(body, dag, now=now, dry_run=dry_run, will_run=will_run)


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


__all__ = [
    "BACKFILL_ROUTES",
    "BackfillGuardMiddleware",
    "evaluate_backfill_request",
    "guard_of",
    "window_end",
]

"""The backfill guard in front of Airflow's API, and the parse-time flag on unbounded catchup.

Fast: `evaluate_backfill_request` against real DAGs built here (authoring DAGs and their
serialized form, the one the API server loads); `BackfillGuardMiddleware` driven as ASGI with a
tiny downstream app that records what it received; `flag_unbounded_catchup` and the `dag_policy`
hook, registered through an `airflow.policy` entry point and run by a real DagBag parse.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_idempotent.errors import WindowError
from airflow_idempotent.guard import GuardConfig, GuardRefusal, backfills
from airflow_idempotent.guard.backfills import evaluate_backfill_request, serialized_dag
from airflow_idempotent.plugins import catchup, guard_middleware
from airflow_idempotent.plugins.guard_middleware import BackfillGuardMiddleware

UTC = dt.timezone.utc
START = pendulum.datetime(2026, 8, 1, tz="UTC")
DECLARED = {"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}
SEMANTICS_MESSAGE = "a backfill must declare its rerun semantics in the DAG run conf"


def guarded_dag(dag_id: str = "guarded", cap: int = 5, **kwargs: Any) -> DAG:
    params = {**GuardConfig(cap=cap, **kwargs.pop("guard", {})).param(), "policy_version": "v1"}
    kwargs.setdefault("schedule", "@daily")
    return DAG(dag_id, start_date=START, params=params, **kwargs)


def body(days: int = 2, conf: Any = DECLARED, **extra: Any) -> dict[str, Any]:
    """A request for `days` daily windows from 2026-08-01 (to_date is the last logical date)."""
    request: dict[str, Any] = {
        "dag_id": "guarded",
        "from_date": "2026-08-01T00:00:00Z",
        "to_date": (START + dt.timedelta(days=days - 1)).isoformat(),
    }
    if conf is not None:
        request["dag_run_conf"] = conf
    return request | extra


def refusal(request: Mapping[str, Any], dag: Any, **kwargs: Any) -> str | None:
    result = evaluate_backfill_request(request, dag, **kwargs)
    assert result is None or isinstance(result, GuardRefusal)
    return None if result is None else str(result)


@pytest.fixture(scope="module")
def dag() -> Any:
    """The guarded daily DAG as the API server has it: serialized (Airflow's scheduler-side DAG)."""
    return serialized_dag(guarded_dag())


# --------------------------------------------------------------------------------------------
# evaluate_backfill_request
# --------------------------------------------------------------------------------------------


def test_a_declared_backfill_within_the_cap_passes(dag: Any) -> None:
    assert refusal(body(2), dag) is None
    assert refusal(body(5), dag) is None  # exactly the cap


def test_the_authoring_dag_and_its_serialized_form_agree() -> None:
    authoring = guarded_dag()
    assert refusal(body(2), authoring) is None
    assert "approve_windows" in (refusal(body(6), authoring) or "")


def test_an_unguarded_dag_is_never_refused() -> None:
    unguarded = serialized_dag(DAG("plain", schedule="@daily", start_date=START))
    for request in (body(400, conf=None), body(2, conf={"anything": 1}), {"dag_id": "plain"}):
        assert refusal(request, unguarded) is None


@pytest.mark.parametrize("conf", [None, {}, {"reason": "forgot the semantics"}])
def test_undeclared_semantics_are_refused_saying_what_to_add(dag: Any, conf: Any) -> None:
    message = refusal(body(2, conf=conf), dag)
    assert message is not None and SEMANTICS_MESSAGE in message
    assert '"semantics": "corrective"' in message  # the example to copy
    assert "replay" in message and "reconcile" in message


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"semantics": "redo", "reason": "x"}, "conf semantics 'redo' is not one of replay, corrective"),
        ({"semantics": "replay"}, "conf reason is missing"),
        ({"semantics": "corrective", "reason": "x"}, 'add "policy_version" to the conf'),
        ({"semantics": "replay", "reason": "x", "approve_windows": 0}, "conf approve_windows must be"),
        ({"semantics": "replay", "reason": "x", "resend_effects": "yes"}, "conf resend_effects must be"),
        ({"semantics": "replay", "reason": "x", "colour": "red"}, "unknown conf key(s) ['colour']"),
        ({**DECLARED, "thresholds": {"max_changed_rows": -1}}, "max_changed_rows must be a whole number"),
        ({**DECLARED, "thresholds": {"max_rows": 5}}, "unknown threshold(s) ['max_rows']"),
        ({**DECLARED, "thresholds": [1]}, "thresholds must be an object"),
        ({**DECLARED, "thresholds": {"max_shrink": 2}}, "max_shrink must be a fraction between 0 and 1"),
    ],
)
def test_invalid_declarations_are_refused_with_the_guards_message(
    dag: Any, conf: dict[str, Any], expected: str
) -> None:
    message = refusal(body(2, conf=conf), dag)
    assert message is not None and expected in message, message


def test_the_ui_prefilled_params_are_not_unknown_conf_keys(dag: Any) -> None:
    """The UI's dialog sends every DAG param in the conf, the read-only guard param included."""
    conf = {**DECLARED, "idempotent_guard": GuardConfig(cap=5).to_json(), "policy_version": "v2"}
    assert refusal(body(2, conf=conf), dag) is None


def test_over_the_cap_needs_the_exact_count_approved(dag: Any) -> None:
    message = refusal(body(6), dag)
    assert message == (
        "this backfill covers 6 windows, over the DAG's cap of 5: split it, or approve exactly this "
        'count by adding "approve_windows": 6 to the conf.'
    )
    assert refusal(body(6, conf={**DECLARED, "approve_windows": 6}), dag) is None
    wrong = refusal(body(6, conf={**DECLARED, "approve_windows": 7}), dag)
    assert wrong is not None and '"approve_windows": 6' in wrong


def test_the_count_is_the_runs_airflow_will_create(dag: Any) -> None:
    """Windows whose run exists are skipped by Airflow (reprocess_behavior none): not counted."""
    existing = {START + dt.timedelta(days=d) for d in (0, 1)}
    seen: list[str] = []

    def will_run(info: Any, behavior: Any) -> bool:
        seen.append(behavior.value)
        return info.logical_date not in existing

    assert refusal(body(7), dag, will_run=will_run) is None  # 5 of 7 run: within the cap of 5
    assert set(seen) == {"none"}
    seen.clear()
    message = refusal(body(8, reprocess_behavior="completed"), dag, will_run=will_run)
    assert message is not None and '"approve_windows": 6' in message
    assert set(seen) == {"completed"}
    # Nothing left to run: nothing to guard (Airflow creates no run).
    assert refusal(body(2, conf=None), dag, will_run=lambda info, behavior: False) is not None  # conf first
    assert refusal(body(2), dag, will_run=lambda info, behavior: False) is None


def test_run_backwards_covers_the_same_windows(dag: Any) -> None:
    message = refusal(body(6, run_backwards=True), dag)
    assert message is not None and '"approve_windows": 6' in message


def test_windows_that_have_not_closed_are_refused(dag: Any) -> None:
    now = dt.datetime(2026, 8, 2, 12, tzinfo=UTC)  # the window of 2026-08-02 is still open
    message = refusal(body(3), dag, now=now)
    assert message == (
        "2 window(s) of this backfill have not closed yet (the first ends 2026-08-03T00:00:00+00:00): "
        "end the range at a window that is complete."
    )
    assert refusal(body(2), dag, now=dt.datetime(2026, 8, 3, tzinfo=UTC)) is None  # ends exactly now


def test_todays_window_is_open_by_the_real_clock() -> None:
    """Airflow's zero-width @daily run for today (logical date midnight) is in its list; its window
    (logical date + granularity day) ends tomorrow."""
    today = pendulum.now("UTC").start_of("day")
    dag = serialized_dag(
        DAG("guarded", schedule="@daily", start_date=today.subtract(days=10), params=GuardConfig().param())
    )
    request = {
        "dag_id": "guarded",
        "from_date": today.subtract(days=2).isoformat(),
        "to_date": today.add(days=1).isoformat(),
        "dag_run_conf": DECLARED,
    }
    message = refusal(request, dag)
    assert message is not None and "1 window(s) of this backfill have not closed yet" in message
    assert today.add(days=1).isoformat() in message


def test_a_data_interval_timetable_uses_the_intervals_end() -> None:
    from airflow.timetables.interval import CronDataIntervalTimetable

    dag = serialized_dag(
        guarded_dag(schedule=CronDataIntervalTimetable("0 0 * * *", "UTC"), guard={"granularity": None})
    )
    assert refusal(body(3), dag) is None
    now = dt.datetime(2026, 8, 2, 12, tzinfo=UTC)
    message = refusal(body(3), dag, now=now)
    assert message is not None and "(the first ends 2026-08-03T00:00:00+00:00)" in message


def test_a_zero_width_window_without_granularity_cannot_be_checked() -> None:
    dag = serialized_dag(guarded_dag(guard={"granularity": None}))
    message = refusal(body(2), dag)
    assert message is not None
    assert message.startswith("this DAG is guarded by airflow-idempotent and its backfill request could not")
    assert "GuardConfig(granularity='day')" in message and "Nothing was created." in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"from_date": "yesterday"}, "from_date: Input should be a valid datetime"),
        ({"to_date": None}, "to_date: Input should be a valid datetime"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
        ({"dag_run_conf": "semantics=replay"}, "dag_run_conf: Input should be a valid dictionary"),
    ],
)
def test_a_guarded_body_that_cannot_be_evaluated_is_refused_with_the_reason(
    dag: Any, change: dict[str, Any], expected: str
) -> None:
    message = refusal(body(2) | change, dag)
    assert message is not None and "could not be checked" in message and expected in message, message


def test_a_missing_field_is_named(dag: Any) -> None:
    message = refusal({"dag_id": "guarded", "dag_run_conf": DECLARED}, dag)
    assert (
        message is not None
        and "from_date: Field required" in message
        and "to_date: Field required" in message
    )


@pytest.mark.parametrize(
    "request_body",
    [
        body(2) | {"from_date": "2026-08-05T00:00:00Z", "to_date": "2026-08-01T00:00:00Z"},  # reversed
        body(2) | {"from_date": "2099-01-01T00:00:00Z", "to_date": "2099-01-05T00:00:00Z"},  # future only
        body(2, conf={**DECLARED, "idempotent_guard": {"cap": 500}}),  # loosening the const param
    ],
    ids=["from-after-to", "future-only", "guard-param-overridden"],
)
def test_what_airflow_refuses_itself_is_left_to_airflow(dag: Any, request_body: dict[str, Any]) -> None:
    assert refusal(request_body, dag) is None


def test_a_non_periodic_schedule_is_left_to_airflow() -> None:
    dag = serialized_dag(guarded_dag(schedule=None))
    assert refusal(body(40, conf=None), dag) is None


def test_an_invalid_guard_declaration_refuses_every_backfill() -> None:
    dag = serialized_dag(DAG("guarded", schedule="@daily", start_date=START, params={"idempotent_guard": 5}))
    message = refusal(body(2), dag)
    assert message is not None and "idempotent_guard param is not a guard declaration" in message
    broken = {"idempotent_guard": {"cap": 0}}
    message = refusal(body(2), serialized_dag(DAG("g2", schedule="@daily", start_date=START, params=broken)))
    assert message is not None and "guard cap must be a whole number >= 1" in message


def test_a_dry_run_without_conf_checks_only_the_windows_closing(dag: Any) -> None:
    """The UI's dialog dry-runs without conf while the dates are edited and disables Run on error."""
    assert refusal(body(40, conf=None), dag, dry_run=True) is None  # over the cap: the create decides
    now = dt.datetime(2026, 8, 2, 12, tzinfo=UTC)
    message = refusal(body(3, conf=None), dag, dry_run=True, now=now)
    assert message is not None and "have not closed yet" in message
    # With a conf, a dry run is refused exactly as the create.
    assert refusal(body(6), dag, dry_run=True) == refusal(body(6), dag)
    message = refusal(body(2, conf={}), dag, dry_run=True)
    assert message is not None and SEMANTICS_MESSAGE in message


def test_a_huge_range_is_refused_without_looking_up_each_window(
    dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backfills, "MAX_WINDOWS", 50)
    looked_up: list[Any] = []

    def will_run(info: Any, behavior: Any) -> bool:
        looked_up.append(info)
        return True

    message = refusal(body(60), dag, will_run=will_run)
    assert message is not None and "covers more than 50 windows, more than the guard evaluates" in message
    assert "split it into backfills of at most 5 windows" in message
    assert looked_up == []


# --------------------------------------------------------------------------------------------
# BackfillGuardMiddleware, driven as ASGI
# --------------------------------------------------------------------------------------------


class Downstream:
    """A tiny ASGI app standing in for Airflow: records what it received, answers 201."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, list[dict[str, Any]]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        messages, chunks = [], []
        while True:
            message = await receive()
            messages.append(message)
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        self.calls.append((scope["path"], b"".join(chunks), messages))
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"created"})


def http_scope(path: str, method: str = "POST", root_path: str = "") -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": root_path + path,
        "root_path": root_path,
        "raw_path": (root_path + path).encode(),
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
    }


def call(
    middleware: BackfillGuardMiddleware, scope: dict[str, Any], chunks: list[bytes]
) -> tuple[int, bytes]:
    """Send `chunks` as the request body; return the status and body of the response."""

    async def run() -> tuple[int, bytes]:
        incoming = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)
        ]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if incoming:
                return incoming.pop(0)
            await asyncio.sleep(3600)  # a client that stays connected
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            sent.append(message)

        await middleware(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")

    return asyncio.run(run())


class Recorder:
    """`decide` for the middleware: evaluate_backfill_request on the DAGs built here (no database)."""

    def __init__(self, dags: dict[str, Any]) -> None:
        self.dags = dags
        self.calls: list[tuple[str, bool]] = []

    def __call__(
        self, dag_id: str, request: Mapping[str, Any], dry_run: bool, now: Any, scope: Any, user: Any
    ) -> GuardRefusal | None:
        assert user == "admin"
        self.calls.append((dag_id, dry_run))
        dag = self.dags.get(dag_id)
        return None if dag is None else evaluate_backfill_request(request, dag, now=now, dry_run=dry_run)


async def admin(scope: Any) -> str:
    return "admin"


@pytest.fixture
def stack(dag: Any) -> tuple[BackfillGuardMiddleware, Downstream, Recorder]:
    downstream = Downstream()
    recorder = Recorder(
        {"guarded": dag, "plain": serialized_dag(DAG("plain", schedule="@daily", start_date=START))}
    )
    middleware = BackfillGuardMiddleware(downstream, authenticate=admin, decide=recorder)
    return middleware, downstream, recorder


def odd_bytes(payload: dict[str, Any]) -> bytes:
    """A JSON body with unusual spacing and key order: replayed, never re-serialized."""
    return (
        "{\n  " + ",\n\t".join(f"{json.dumps(k)} :  {json.dumps(v)}" for k, v in payload.items()) + " }"
    ).encode()


@pytest.mark.parametrize("path", ["/api/v2/backfills", "/api/v2/backfills/dry_run"])
def test_a_valid_guarded_request_reaches_airflow_byte_identical(stack: Any, path: str) -> None:
    middleware, downstream, recorder = stack
    raw = odd_bytes(body(2))
    assert call(middleware, http_scope(path), [raw[:7], raw[7:30], raw[30:]]) == (201, b"created")
    [(seen_path, seen_body, messages)] = downstream.calls
    assert (seen_path, seen_body) == (path, raw)
    assert messages == [{"type": "http.request", "body": raw, "more_body": False}]
    assert recorder.calls == [("guarded", path.endswith("dry_run"))]


def test_an_unguarded_dags_request_passes_byte_identical(stack: Any) -> None:
    middleware, downstream, _ = stack
    raw = odd_bytes(body(400, conf=None) | {"dag_id": "plain"})
    assert call(middleware, http_scope("/api/v2/backfills"), [raw]) == (201, b"created")
    assert downstream.calls[0][1] == raw


@pytest.mark.parametrize(
    ("path", "request_body", "expected"),
    [
        ("/api/v2/backfills", body(2, conf=None), SEMANTICS_MESSAGE),
        ("/api/v2/backfills", body(6), '"approve_windows": 6'),
        ("/api/v2/backfills/dry_run", body(6), '"approve_windows": 6'),
        ("/api/v2/backfills/dry_run", body(2, conf={}), SEMANTICS_MESSAGE),
        ("/api/v2/backfills", body(2) | {"from_date": "soon"}, "could not be checked"),
    ],
)
def test_a_refused_request_gets_422_with_the_message_and_never_reaches_airflow(
    stack: Any, path: str, request_body: dict[str, Any], expected: str
) -> None:
    middleware, downstream, _ = stack
    status, answer = call(middleware, http_scope(path), [json.dumps(request_body).encode()])
    assert status == 422
    detail = json.loads(answer)["detail"]
    assert isinstance(detail, str) and expected in detail
    assert downstream.calls == []


def test_the_refusal_is_a_json_detail_with_content_length(stack: Any) -> None:
    middleware, _, _ = stack
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": json.dumps(body(6)).encode(), "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await middleware(http_scope("/api/v2/backfills"), receive, send)

    asyncio.run(run())
    start, content = sent
    headers = dict(start["headers"])
    assert start["status"] == 422 and headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(content["body"])
    assert json.loads(content["body"]) == {
        "detail": str(evaluate_backfill_request(body(6), stack[2].dags["guarded"]))
    }


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"",
        b"[1, 2]",
        b'{"from_date": "2026-08-01"}',
        b'{"dag_id": 7}',
        '{"dag_id": "\xe9"}'.encode("latin-1"),
    ],
    ids=["malformed", "empty", "array", "no-dag-id", "dag-id-not-str", "not-utf8"],
)
def test_bodies_without_a_dag_id_go_to_airflow_untouched(stack: Any, raw: bytes) -> None:
    middleware, downstream, recorder = stack
    assert call(middleware, http_scope("/api/v2/backfills"), [raw]) == (201, b"created")
    assert downstream.calls[0][1] == raw
    assert recorder.calls == []


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/api/v2/backfills", "GET"),
        ("/api/v2/backfills/3/cancel", "PUT"),
        ("/api/v2/dags/guarded/dagRuns", "POST"),
        ("/api/v2/backfillsX", "POST"),
        ("/ui/backfills", "POST"),
    ],
)
def test_other_routes_pass_untouched(stack: Any, path: str, method: str) -> None:
    middleware, downstream, recorder = stack
    raw = json.dumps(body(40, conf=None)).encode()
    assert call(middleware, http_scope(path, method), [raw]) == (201, b"created")
    assert downstream.calls[0][1] == raw
    assert recorder.calls == []


def test_routes_under_a_root_path_and_with_a_trailing_slash_are_guarded(stack: Any) -> None:
    middleware, downstream, _ = stack
    raw = json.dumps(body(6)).encode()
    assert call(middleware, http_scope("/api/v2/backfills", root_path="/airflow"), [raw])[0] == 422
    assert call(middleware, http_scope("/api/v2/backfills/dry_run/"), [raw])[0] == 422
    assert downstream.calls == []


def test_a_caller_airflow_will_refuse_is_left_to_airflow(dag: Any) -> None:
    downstream, recorder = Downstream(), Recorder({"guarded": dag})

    async def nobody(scope: Any) -> None:
        return None

    middleware = BackfillGuardMiddleware(downstream, authenticate=nobody, decide=recorder)
    raw = json.dumps(body(6)).encode()
    assert call(middleware, http_scope("/api/v2/backfills"), [raw]) == (201, b"created")
    assert recorder.calls == []  # nothing about the DAG was looked at for an anonymous caller


def test_airflows_authentication_finds_no_user_without_a_token() -> None:
    assert asyncio.run(guard_middleware.airflow_caller(http_scope("/api/v2/backfills"))) is None
    scope = http_scope("/api/v2/backfills")
    scope["headers"].append((b"authorization", b"Basic YWRtaW46YWRtaW4="))
    assert asyncio.run(guard_middleware.airflow_caller(scope)) is None


def test_when_the_guard_cannot_decide_it_fails_closed(dag: Any) -> None:
    downstream = Downstream()

    def broken(*args: Any) -> None:
        raise ConnectionError("metadata database is down")

    middleware = BackfillGuardMiddleware(downstream, authenticate=admin, decide=broken)
    status, answer = call(middleware, http_scope("/api/v2/backfills"), [json.dumps(body(2)).encode()])
    assert status == 503
    assert json.loads(answer)["detail"].startswith(
        "the backfill guard could not check this request (ConnectionError: metadata database is down); "
        "nothing was created."
    )
    assert downstream.calls == []


def test_a_client_that_disconnects_mid_body_reaches_nothing(stack: Any) -> None:
    middleware, downstream, recorder = stack
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": b'{"dag_id"', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[Any] = []

    async def run() -> None:
        async def receive() -> dict[str, Any]:
            return messages.pop(0)

        async def send(message: Any) -> None:
            sent.append(message)

        await middleware(http_scope("/api/v2/backfills"), receive, send)

    asyncio.run(run())
    assert (downstream.calls, recorder.calls, sent) == ([], [], [])


def test_lifespan_and_websockets_pass_through(stack: Any) -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    guard = BackfillGuardMiddleware(app, authenticate=admin, decide=stack[2])
    for kind in ("lifespan", "websocket"):
        asyncio.run(guard({"type": kind, "path": "/api/v2/backfills"}, None, None))  # type: ignore[arg-type]
    assert seen == ["lifespan", "websocket"]


def test_the_plugin_installs_the_middleware_the_way_airflow_does() -> None:
    from fastapi import FastAPI

    from airflow_idempotent.plugins.listener import IdempotentPlugin

    [entry] = IdempotentPlugin.fastapi_root_middlewares
    assert entry["middleware"] is BackfillGuardMiddleware
    app = FastAPI()
    app.add_middleware(entry["middleware"], *entry["args"], **entry["kwargs"])  # as airflow's init_plugins
    app.build_middleware_stack()
    assert any(m.cls is BackfillGuardMiddleware for m in app.user_middleware)


# --------------------------------------------------------------------------------------------
# Unbounded catchup, flagged when the DAG is parsed
# --------------------------------------------------------------------------------------------

NOW = dt.datetime(2026, 8, 20, 12, tzinfo=UTC)


def test_catchup_over_the_guard_cap_is_flagged() -> None:
    message = catchup.flag_unbounded_catchup(guarded_dag(catchup=True), now=NOW)
    assert message == (
        "DAG 'guarded' has catchup=True and would schedule more than 5 windows from its start_date "
        "(2026-08-01T00:00:00+00:00) to now, over the backfill guard's cap of 5: set catchup=False "
        "(Airflow 3's default) and backfill deliberately in ranges of at most 5 windows, or move "
        "start_date to within 5 windows of today."
    )


def test_unguarded_dags_use_the_default_cap() -> None:
    dag = DAG("plain", schedule="@daily", start_date=START, catchup=True)
    assert catchup.flag_unbounded_catchup(dag, now=NOW) is None  # 20 windows <= 31
    message = catchup.flag_unbounded_catchup(dag, now=dt.datetime(2026, 10, 1, tzinfo=UTC))
    assert message is not None and "more than 31 windows" in message and "default guard cap of 31" in message


@pytest.mark.parametrize(
    "make",
    [
        lambda: guarded_dag(catchup=False),  # Airflow 3's default
        lambda: guarded_dag(catchup=True, end_date=pendulum.datetime(2026, 8, 5, tz="UTC")),  # 5 windows
        lambda: guarded_dag(catchup=True, schedule=None),
        lambda: guarded_dag(catchup=True, schedule="@once"),
        lambda: DAG(
            "late", schedule="@daily", start_date=pendulum.datetime(2026, 8, 16, tz="UTC"), catchup=True
        ),
    ],
    ids=["catchup-off", "end-date-bounds-it", "no-schedule", "once", "recent-start"],
)
def test_bounded_catchup_is_not_flagged(make: Callable[[], DAG]) -> None:
    assert catchup.flag_unbounded_catchup(make(), now=NOW) is None


def test_the_count_stops_at_the_cap() -> None:
    """A minutely DAG from years ago is flagged after cap + 1 windows, not after millions."""
    import time

    dag = DAG(
        "minutely", schedule="* * * * *", start_date=pendulum.datetime(2020, 1, 1, tz="UTC"), catchup=True
    )
    began = time.monotonic()
    assert catchup.flag_unbounded_catchup(dag, now=NOW) is not None
    assert time.monotonic() - began < 1.0


def test_the_policy_warns_by_default_refuses_on_opt_in(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.exceptions import AirflowClusterPolicyViolation

    old = DAG(
        "old",
        schedule="@daily",
        start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
        catchup=True,
        params=GuardConfig().param(),  # a DAG of this provider: the guard declared
    )
    monkeypatch.delenv("AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP", raising=False)
    with caplog.at_level(logging.WARNING, logger=catchup.__name__):
        catchup.dag_policy(old)
    assert any("DAG 'old' has catchup=True" in r.getMessage() for r in caplog.records)
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP", "refuse")
    with pytest.raises(AirflowClusterPolicyViolation, match="DAG 'old' has catchup=True"):
        catchup.dag_policy(old)
    catchup.dag_policy(DAG("fine", schedule="@daily", start_date=START))  # catchup off: nothing
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP", "off")
    caplog.clear()
    catchup.dag_policy(old)
    assert caplog.records == []


def test_the_policy_leaves_dags_without_the_providers_parts_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Catchup in someone else's DAG (no operator of this package, no guard) is not this provider's
    business: no warning, and with `refuse` the DAG still loads."""
    from airflow.providers.standard.operators.empty import EmptyOperator

    with DAG(
        "theirs", schedule="@daily", start_date=pendulum.datetime(2020, 1, 1, tz="UTC"), catchup=True
    ) as theirs:
        EmptyOperator(task_id="noop")
    assert catchup.flag_unbounded_catchup(theirs, now=NOW) is not None  # it would be flagged if ours
    assert not catchup.uses_this_provider(theirs)
    monkeypatch.delenv("AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP", raising=False)
    with caplog.at_level(logging.WARNING, logger=catchup.__name__):
        catchup.dag_policy(theirs)
    assert caplog.records == []
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP", "refuse")
    catchup.dag_policy(theirs)


def test_an_operator_of_this_provider_makes_the_dag_ours() -> None:
    from airflow_idempotent.operators import PartitionOverwriteOperator

    with DAG(
        "ours", schedule="@daily", start_date=pendulum.datetime(2020, 1, 1, tz="UTC"), catchup=True
    ) as ours:
        PartitionOverwriteOperator(
            task_id="write",
            conn_id="warehouse",
            table="payouts",
            sql="SELECT 1 AS x",
            partition_column="sale_date",
            granularity="day",
        )
    assert catchup.uses_this_provider(ours)


def test_the_setting_is_declared_in_the_providers_config() -> None:
    """`airflow config list` shows what the provider declares in get_provider_info()['config']."""
    from airflow_idempotent import get_provider_info

    option = get_provider_info()["config"][catchup.CONFIG_SECTION]["options"][catchup.CONFIG_KEY]
    assert option["default"] == "warn" and option["type"] == "string"
    assert all(mode in option["description"] for mode in catchup.MODES)


def test_a_failing_count_never_breaks_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(dag: Any, now: Any = None) -> None:
        raise RuntimeError("timetable exploded")

    monkeypatch.setattr(catchup, "flag_unbounded_catchup", boom)
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP", "refuse")
    catchup.dag_policy(DAG("x", schedule="@daily", start_date=START, catchup=True))


ENTRY_POINT = "airflow_idempotent.plugins.catchup"
DAG_FILE = """
import pendulum
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator

from airflow_idempotent.guard import GuardConfig

with DAG("catchup_from_2020", schedule="@daily", start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
         catchup=True, params=GuardConfig().param()):
    EmptyOperator(task_id="noop")

with DAG("not_ours_from_2020", schedule="@daily", start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
         catchup=True):
    EmptyOperator(task_id="noop")

with DAG("no_catchup", schedule="@daily", start_date=pendulum.datetime(2020, 1, 1, tz="UTC")):
    EmptyOperator(task_id="noop")
"""


@pytest.fixture
def policy_from_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Airflow's policy plugin manager loading this package's `airflow.policy` entry point, from a
    distribution on sys.path declaring it as pyproject.toml should (see catchup.py)."""
    import pluggy
    from airflow import policies, settings

    dist = tmp_path / "site" / "idem_policy_probe-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: idem-policy-probe\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(f"[airflow.policy]\nidempotent = {ENTRY_POINT}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    import importlib

    importlib.invalidate_caches()
    manager = pluggy.PluginManager(policies.local_settings_hookspec.project_name)
    manager.add_hookspecs(policies)
    manager.register(policies.DefaultPolicy)
    settings.load_policy_plugins(manager)  # what settings.initialize() does
    assert manager.get_plugin("idempotent") is sys.modules[ENTRY_POINT]
    monkeypatch.setattr(settings, "get_policy_plugin_manager", lambda: manager)
    return manager


def test_a_real_dagbag_parse_runs_the_policy(
    policy_from_entry_point: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "catchup_dags.py").write_text(DAG_FILE)
    monkeypatch.delenv("AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP", raising=False)
    with caplog.at_level(logging.WARNING, logger=catchup.__name__):
        bag = DagBag(dag_folder=str(dags), bundle_path=dags, bundle_name="test", known_pools=set())
    assert set(bag.dags) == {"catchup_from_2020", "not_ours_from_2020", "no_catchup"}, bag.import_errors
    flagged = [r.getMessage() for r in caplog.records if r.name == catchup.__name__]
    assert len(flagged) == 1 and "DAG 'catchup_from_2020' has catchup=True" in flagged[0]

    monkeypatch.setenv("AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP", "refuse")
    bag = DagBag(dag_folder=str(dags), bundle_path=dags, bundle_name="test", known_pools=set())
    assert "catchup_from_2020" not in bag.dags and "not_ours_from_2020" in bag.dags
    [error] = bag.import_errors.values()
    assert "DAG 'catchup_from_2020' has catchup=True and would schedule more than 31 windows" in error


# --------------------------------------------------------------------------------------------
# GuardConfig.window: where a run's window ends, as the operators compute it
# --------------------------------------------------------------------------------------------


def test_window_end_of_each_kind_of_run() -> None:
    from airflow.timetables.base import DagRunInfo, DataInterval

    midnight = pendulum.datetime(2026, 8, 25, tz="UTC")
    six = midnight.add(hours=6)

    def end(info: DagRunInfo, granularity: str | None) -> Any:
        return GuardConfig(granularity=granularity).window(info).end

    assert end(DagRunInfo.interval(midnight, midnight.add(hours=1)), "day") == midnight.add(hours=1)
    assert end(DagRunInfo.exact(midnight), "day") == midnight.add(days=1)
    assert end(DagRunInfo.exact(six), "day") == midnight.add(days=1)  # the day containing it
    assert end(DagRunInfo.exact(midnight), "month") == pendulum.datetime(2026, 9, 1, tz="UTC")
    assert end(DagRunInfo.exact(six), "hour") == six.add(hours=1)
    partition = DagRunInfo(run_after=six, data_interval=None, partition_date=six, partition_key="2026-08-25")
    assert end(partition, "day") == midnight.add(days=1)
    keyed = DagRunInfo(run_after=six, data_interval=None, partition_key="2026-08-25")
    assert end(keyed, "week") == pendulum.datetime(2026, 8, 31, tz="UTC")  # ISO week from Monday 24th
    with pytest.raises(WindowError, match="declares no granularity"):
        end(DagRunInfo(run_after=six, data_interval=DataInterval(six, six)), None)


# --------------------------------------------------------------------------------------------
# Credentials resolved exactly as Airflow resolves them (F1); bounded bodies (F7, F8).
# --------------------------------------------------------------------------------------------

GOOD = "a.valid.jwt"


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's token check, stubbed: GOOD is a user, anything else Airflow's 403."""
    from airflow.api_fastapi.core_api import security
    from fastapi import HTTPException

    async def resolve(token: str | None) -> str:
        if token != GOOD:
            raise HTTPException(status_code=403, detail="Invalid JWT token")
        return "admin"

    monkeypatch.setattr(security, "resolve_user_from_token", resolve)


def scope_with(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    scope = http_scope("/api/v2/backfills")
    scope["headers"] = [*scope["headers"], *headers]
    return scope


AIRFLOW_ACCEPTS = {
    "Bearer": [(b"authorization", b"Bearer " + GOOD.encode())],
    "Bearer + two spaces": [(b"authorization", b"Bearer  " + GOOD.encode())],
    "Bearer + space + tab": [(b"authorization", b"Bearer \t" + GOOD.encode())],
    "lower-case scheme": [(b"authorization", b"bearer " + GOOD.encode())],
    "upper-case scheme": [(b"authorization", b"BEARER " + GOOD.encode())],
    "trailing whitespace": [(b"authorization", b"Bearer " + GOOD.encode() + b" \t")],
    "the UI's cookie": [(b"cookie", b"_token=" + GOOD.encode())],
    "Basic header, then the cookie": [
        (b"authorization", b"Basic YWRtaW46YWRtaW4="),
        (b"cookie", b"_token=" + GOOD.encode()),
    ],
    "empty Bearer, then the cookie": [
        (b"authorization", b"Bearer "),
        (b"cookie", b"_token=" + GOOD.encode()),
    ],
}
AIRFLOW_REFUSES = {
    "no credentials": [],
    "Bearer + tab only": [(b"authorization", b"Bearer\t" + GOOD.encode())],
    "Basic": [(b"authorization", b"Basic YWRtaW46YWRtaW4=")],
    "a bad Bearer beats a good cookie": [
        (b"authorization", b"Bearer nope"),
        (b"cookie", b"_token=" + GOOD.encode()),
    ],
}


@pytest.mark.parametrize("form", list(AIRFLOW_ACCEPTS))
def test_every_credential_form_airflow_accepts_is_the_same_caller(tokens: None, form: str) -> None:
    """The guard's caller is Airflow's: the forms its HTTPBearer + get_user accept get a user."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user
    from starlette.requests import Request

    scope = scope_with(AIRFLOW_ACCEPTS[form])

    async def airflows() -> Any:
        request = Request(scope)
        return await get_user(request, None, await bearer_scheme(request))

    assert asyncio.run(airflows()) == "admin"
    assert asyncio.run(guard_middleware.airflow_caller(scope)) == "admin"


@pytest.mark.parametrize("form", list(AIRFLOW_REFUSES))
def test_a_form_airflow_refuses_is_left_to_airflows_401(tokens: None, form: str) -> None:
    assert asyncio.run(guard_middleware.airflow_caller(scope_with(AIRFLOW_REFUSES[form]))) is None


@pytest.mark.parametrize("form", list(AIRFLOW_ACCEPTS))
@pytest.mark.parametrize("path", ["/api/v2/backfills", "/api/v2/backfills/dry_run"])
def test_an_over_cap_request_gets_the_guards_422_whatever_the_credential_form(
    tokens: None, dag: Any, form: str, path: str
) -> None:
    downstream = Downstream()
    middleware = BackfillGuardMiddleware(downstream, decide=Recorder({"guarded": dag}))
    scope = scope_with(AIRFLOW_ACCEPTS[form])
    scope["path"] = scope["raw_path"] = path  # type: ignore[assignment]
    status, answer = call(middleware, scope, [json.dumps(body(6)).encode()])
    assert status == 422
    assert '"approve_windows": 6' in json.loads(answer)["detail"]
    assert downstream.calls == []


class Chunks:
    """A receive handing out `chunks`, counting how many were asked for."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.read = chunks, 0

    async def __call__(self) -> dict[str, Any]:
        self.read += 1
        more = self.read < len(self.chunks)
        return {"type": "http.request", "body": self.chunks[self.read - 1], "more_body": more}


def answer_of(middleware: BackfillGuardMiddleware, scope: dict[str, Any], receive: Any) -> tuple[int, Any]:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(middleware(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


def never_authenticate(scope: Any) -> Any:
    raise AssertionError("authentication work before the body was bounded")


@pytest.mark.parametrize("path", ["/api/v2/backfills", "/api/v2/backfills/dry_run"])
def test_a_declared_length_over_64_kb_is_413_without_reading_the_body(dag: Any, path: str) -> None:
    downstream = Downstream()
    middleware = BackfillGuardMiddleware(downstream, authenticate=never_authenticate, decide=Recorder({}))
    scope = http_scope(path)
    scope["headers"].append((b"content-length", str(50 * 1024 * 1024).encode()))
    receive = Chunks([b"x" * 1024] * 10)
    status, answer = answer_of(middleware, scope, receive)
    assert status == 413 and "64 KB" in answer["detail"]
    assert receive.read == 0 and downstream.calls == []


def test_a_streamed_body_is_cut_at_64_kb(dag: Any) -> None:
    downstream = Downstream()
    middleware = BackfillGuardMiddleware(downstream, authenticate=never_authenticate, decide=Recorder({}))
    receive = Chunks([b" " * 16 * 1024] * 3200)  # 50 MB, no Content-Length
    status, _ = answer_of(middleware, http_scope("/api/v2/backfills"), receive)
    assert status == 413
    assert receive.read == 5  # 80 KB read of 50 MB: one chunk past the limit, then stop
    assert downstream.calls == []


def test_a_body_of_exactly_64_kb_is_read(stack: Any) -> None:
    middleware, _, _ = stack
    raw = json.dumps(body(2)).encode()
    raw = raw + b" " * (guard_middleware.MAX_BODY - len(raw))
    assert call(middleware, http_scope("/api/v2/backfills"), [raw]) == (201, b"created")


@pytest.mark.parametrize("authenticated", [True, False])
@pytest.mark.parametrize("path", ["/api/v2/backfills", "/api/v2/backfills/dry_run"])
def test_deep_nesting_is_a_422_never_a_recursion_error(
    dag: Any, caplog: pytest.LogCaptureFixture, authenticated: bool, path: str
) -> None:
    async def nobody(scope: Any) -> None:
        return None

    downstream = Downstream()
    middleware = BackfillGuardMiddleware(
        downstream, authenticate=admin if authenticated else nobody, decide=Recorder({"guarded": dag})
    )
    deep = b'{"dag_id": "guarded", "dag_run_conf": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    with caplog.at_level(logging.INFO):
        status, answer = call(middleware, http_scope(path), [deep])
    assert status == 422
    assert "deeper than 64 levels" in json.loads(answer)["detail"]
    assert downstream.calls == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


def test_nesting_is_counted_outside_strings_only() -> None:
    assert not guard_middleware.nesting_exceeds(b'{"a": "[[[[[[[[[[\\"[[[["}', 3)
    assert guard_middleware.nesting_exceeds(b'{"a": [[[1]]]}', 3)
    assert not guard_middleware.nesting_exceeds(b'{"a": [[1]]}', 3)

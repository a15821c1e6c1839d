"""The UI's answers to hostile bodies and its documented surface (issue 14: F5, F6, F10, refused
characters), through real parts (tests/ui_env.py: Airflow's own app and auth).

A body over the limit is refused with 413 before it is parsed or written to Airflow's audit log
(declared length or chunked); a deeply nested one with 422; an unexpected error is a 500 without
exception text; every error carries the security headers. Characters the databases refuse are
422 with nothing created. The OpenAPI document declares the id patterns and every error answer,
and the page's CSRF token dies with the session it was issued to (Airflow's logout).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.history.models import KillSwitch
from airflow_idempotent.plugins.ui.datamodels import DAG_ID_RE, MAX_BODY
from airflow_idempotent.plugins.ui.datamodels.common import json_schema_string
from airflow_idempotent.plugins.ui.security import SECURITY_HEADERS
from tests.ui_env import DAG_A, FORM, UiEnv, ui_environment


@pytest.fixture(scope="module")
def env(airflow_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with ui_environment(tmp_path_factory) as environment:
        yield environment


def audit_rows() -> int:
    """Rows of Airflow's audit log (the Event Log)."""
    from airflow.models import Log
    from airflow.utils.session import create_session

    with create_session() as session:
        return int(session.scalar(sa.select(sa.func.count()).select_from(Log)) or 0)


def state(env: UiEnv) -> tuple[int, int, int]:
    """(Airflow backfills, kill switch rows, audit log rows): what a refused request must not change."""
    from airflow.models.backfill import Backfill
    from airflow.utils.session import create_session

    with create_session() as session:
        backfills = int(session.scalar(sa.select(sa.func.count()).select_from(Backfill)) or 0)
    with env.store.engine.connect() as conn:
        switches = conn.execute(sa.select(sa.func.count()).select_from(KillSwitch.__table__)).scalar_one()
    return backfills, int(switches), audit_rows()


# --------------------------------------------------------------------------------------------
# F5, F6: bodies over the limit, deeply nested bodies, errors' headers
# --------------------------------------------------------------------------------------------

POST_ROUTES = [
    f"/idempotent/api/dags/{DAG_A}/backfills/preview",
    f"/idempotent/api/dags/{DAG_A}/backfills",
    f"/idempotent/api/dags/{DAG_A}/backfills/{{backfill_id}}/stop",
    f"/idempotent/api/dags/{DAG_A}/killswitch/clear",
    f"/idempotent/api/dags/{DAG_A}/rerun/preview",
]


def _post(env: UiEnv, template: str, content: Any, **headers: str) -> Any:
    path = template.replace("{backfill_id}", str(env.backfills[DAG_A]))
    return env.call("POST", path, content=content, headers={"Content-Type": "application/json", **headers})


def _secure(answer: Any) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert answer.headers.get(name) == value, (name, answer.status_code, answer.text[:200])


@pytest.mark.parametrize("template", POST_ROUTES, ids=lambda p: p.rsplit("/", 1)[-1])
def test_a_deeply_nested_body_is_refused_with_422_and_the_security_headers(env: UiEnv, template: str) -> None:
    before = state(env)
    for raw in (
        b"[" * 10_000 + b"]" * 10_000,
        b'{"reason": ' + b'{"a": ' * 5_000 + b"1" + b"}" * 5_001,
        b'{"thresholds": ' + b"[" * 40 + b"]" * 40 + b"}",  # deeper than any form, small
    ):
        answer = _post(env, template, raw)
        assert answer.status_code == 422, (raw[:40], answer.status_code, answer.text[:300])
        _secure(answer)
        assert "Recursion" not in answer.text and "Traceback" not in answer.text
    assert state(env) == before  # nothing created, set, or written to the audit log


@pytest.mark.parametrize("template", POST_ROUTES, ids=lambda p: p.rsplit("/", 1)[-1])
def test_a_body_over_the_limit_is_refused_before_it_is_parsed_or_audited(env: UiEnv, template: str) -> None:
    before = state(env)
    big = json.dumps({**FORM, "reason": "x" * (20 * 1024 * 1024)}).encode()
    just_over = json.dumps({**FORM, "reason": "x" * MAX_BODY}).encode()
    for content in (big, just_over, iter([just_over[:1000], just_over[1000:]])):  # the last one chunked
        answer = _post(env, template, content)
        assert answer.status_code == 413, (answer.status_code, answer.text[:300])
        _secure(answer)
    assert state(env) == before  # not in Airflow's audit log


def test_an_unexpected_error_is_a_500_with_the_security_headers_and_no_exception_text(
    env: UiEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_idempotent.plugins.ui.routes import backfills, pages

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("internal detail /etc/secret")

    monkeypatch.setattr(backfills, "guard_state", broken)
    monkeypatch.setattr(pages, "guard_state", broken)
    for path in (f"/idempotent/api/dags/{DAG_A}/guard", f"/idempotent/dags/{DAG_A}/backfill"):
        answer = env.call("GET", path)
        assert answer.status_code == 500, answer.text
        _secure(answer)
        assert "internal detail" not in answer.text and "RuntimeError" not in answer.text


# --------------------------------------------------------------------------------------------
# Characters the databases refuse
# --------------------------------------------------------------------------------------------

REFUSED_TEXT = ["a\x00b", "a\\u0000b", "\\ud800", "x\\udfffy", "\x00"]


@pytest.mark.parametrize("field", ["reason", "policy_version", "from_date", "semantics", "thresholds"])
def test_refused_characters_in_form_fields_are_422_and_nothing_is_created(env: UiEnv, field: str) -> None:
    before = state(env)
    for text in REFUSED_TEXT:
        value = (
            f'{{"max_measure_abs_change": {{"amount{text}": 1}}}}' if field == "thresholds" else f'"{text}"'
        )
        body = json.dumps({k: v for k, v in FORM.items() if k != field})[:-1] + f', "{field}": {value}}}'
        for template in POST_ROUTES[:2]:
            answer = _post(env, template, body.encode())
            assert answer.status_code == 422, (field, text, answer.text[:300])
            _secure(answer)
        stop = _post(env, POST_ROUTES[2], f'{{"reason": "{text}"}}'.encode())
        assert stop.status_code == 422, (text, stop.text[:300])
    assert state(env)[:2] == before[:2]


@pytest.mark.parametrize(
    ("reason", "named"),
    [
        ("pay\u202eout", "U+202E RIGHT-TO-LEFT OVERRIDE at position 4"),
        ("\u200fmark", "U+200F RIGHT-TO-LEFT MARK at position 1"),
        ("a \u2066b", "U+2066 LEFT-TO-RIGHT ISOLATE at position 3"),
        ("  zero\u200b", "U+200B ZERO WIDTH SPACE at position 7"),  # counted in the text as sent
    ],
)
def test_invisible_format_characters_in_text_fields_are_422_naming_them(
    env: UiEnv, reason: str, named: str
) -> None:
    """Bidi controls and zero-width characters could disguise what an approver reads: refused
    by the create, the preview and the stop, naming the character and where it is."""
    before = state(env)
    for template, body in (
        (POST_ROUTES[0], {**FORM, "reason": reason}),
        (POST_ROUTES[1], {**FORM, "reason": reason}),
        (POST_ROUTES[2], {"reason": reason}),
    ):
        answer = _post(env, template, json.dumps(body).encode())
        assert answer.status_code == 422, (template, answer.text[:300])
        assert named in answer.text, answer.text[:500]
    assert state(env)[:2] == before[:2]


def test_a_threshold_on_an_undeclared_measure_is_refused_listing_the_valid_ones(env: UiEnv) -> None:
    """The guard declares measures=["amount_eur"] (tests/ui_env.py)."""
    before = state(env)
    form = {**FORM, "thresholds": {"max_measure_abs_change": {"no_such_col": 1}}}
    expected = (
        "max_measure_abs_change names unknown measure(s) ['no_such_col']; the valid ones are ['amount_eur']"
    )
    answer = _post(env, POST_ROUTES[1], json.dumps(form).encode())
    assert answer.status_code == 422 and expected in answer.json()["detail"], answer.text[:500]
    preview = _post(env, POST_ROUTES[0], json.dumps(form).encode()).json()
    assert expected in preview["refusal"] and not preview["can_submit"], preview["refusal"]
    assert state(env)[:2] == before[:2]


def test_refused_characters_in_query_strings_and_paths_are_422(env: UiEnv) -> None:
    before = state(env)
    attempt = "run_id=r&task_id=t"
    for raw in ("%00", "a%00b", "%ED%A0%80", "%FF", "x%0Ay"):
        for path in (
            f"/idempotent/api/history?dag_id={raw}",
            f"/idempotent/api/history?task_id={raw}",
            f"/idempotent/history?table={raw}",
            f"/idempotent/api/dags/{DAG_A}/attempts?{attempt}&run_id={raw}",
            f"/idempotent/dags/{DAG_A}/attempt?{attempt}&task_id={raw}",
            f"/idempotent/api/dags/{raw}/guard",
            f"/idempotent/dags/{raw}/history",
        ):
            answer = env.call("GET", path)
            if "/dags/x%0A" in path:  # a newline: Airflow's router matches no mount (its own 404)
                assert answer.status_code == 404, (path, answer.status_code, answer.text[:200])
                continue
            assert answer.status_code == 422, (path, answer.status_code, answer.text[:200])
            _secure(answer)
    assert _post(env, POST_ROUTES[2], b'{"reason": "\xff\xfe"}').status_code == 422  # not UTF-8
    assert state(env)[:2] == before[:2]


# --------------------------------------------------------------------------------------------
# F10: the OpenAPI document, and the CSRF token after logout
# --------------------------------------------------------------------------------------------


def test_the_api_answers_what_its_document_promises(env: UiEnv) -> None:
    """Cases where the behaviour disagreed with the OpenAPI document (issue 32, schemathesis)."""
    spec = env.call("GET", "/idempotent/api/openapi.json").json()
    paths = spec["paths"]
    # GET on the preview's path: the preview route's 405, not the status route's 422 for an id.
    assert "get" not in paths["/api/dags/{dag_id}/backfills/preview"]
    assert env.call("GET", f"/idempotent/api/dags/{DAG_A}/backfills/preview").status_code == 405
    assert env.call("GET", f"/idempotent/api/dags/{DAG_A}/backfills/preview/stop").status_code in (404, 405)
    # Clearing the kill switch of a DAG that does not exist: the documented 404.
    assert "404" in paths["/api/dags/{dag_id}/killswitch/clear"]["post"]["responses"]
    answer = env.call("POST", "/idempotent/api/dags/AAA/killswitch/clear", json={})
    assert answer.status_code == 404, answer.text
    # The attempts' run_id and task_id are required (the document says so); map_index=-1 is valid.
    attempts = {p["name"]: p for p in paths["/api/dags/{dag_id}/attempts"]["get"]["parameters"]}
    assert attempts["run_id"]["required"] and attempts["task_id"]["required"]
    answer = env.call("GET", f"/idempotent/api/dags/{DAG_A}/attempts?run_id=0&map_index=-1")
    assert answer.status_code == 422 and "task_id" in answer.text, answer.text
    answer = env.call("GET", f"/idempotent/api/dags/{DAG_A}/attempts?run_id=0&task_id=t&map_index=-1")
    assert answer.status_code == 200, answer.text
    # The history's days: the document's pattern holds only the years the filter accepts.
    history = {p["name"]: p for p in paths["/api/history"]["get"]["parameters"]}
    pattern = re.compile(history["from"]["schema"]["pattern"])
    assert pattern.fullmatch("2026-08-25") and not pattern.fullmatch("9426-07-12")
    assert env.call("GET", "/idempotent/api/history?from=9426-07-12").status_code == 422


def test_the_openapi_document_declares_the_id_patterns_and_every_error_answer(env: UiEnv) -> None:
    spec = env.call("GET", "/idempotent/api/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            codes = set(operation["responses"])
            assert {"200", "401", "403", "422"} <= codes, where
            if "{dag_id}" in path:
                assert "404" in codes, where
            if method == "post":
                assert {"413", "415"} <= codes, where
            if path.endswith(("/backfills", "/stop")):
                assert "409" in codes, where
            for code in codes - {"200"}:
                ref = operation["responses"][code]["content"]["application/json"]["schema"]["$ref"]
                assert "detail" in schemas[ref.rsplit("/", 1)[-1]]["properties"], (where, code)
            params = {(p["in"], p["name"]): p["schema"] for p in operation.get("parameters", [])}
            if ("path", "dag_id") in params:  # Airflow's rule, as JSON Schema reads it
                documented = {"pattern": DAG_ID_RE.pattern}
                json_schema_string(documented)
                assert params[("path", "dag_id")]["pattern"] == documented["pattern"], where
                assert params[("path", "dag_id")]["maxLength"] == 250, where
            if ("path", "backfill_id") in params:
                assert params[("path", "backfill_id")]["minimum"] == 0, where
            for name in ("run_id", "task_id", "table"):
                if ("query", name) in params:
                    assert "pattern" in json.dumps(params[("query", name)]), (where, name)
    # Every error answer a client can get is one of the documented shapes.
    assert env.call("GET", f"/idempotent/api/dags/{DAG_A}/backfills/999999").json() == {
        "detail": "Backfill not found"
    }


def _page_csrf(env: UiEnv, cookie: str) -> str:
    from fastapi.testclient import TestClient

    client = TestClient(env.app, cookies={"_token": cookie})
    page = client.get(f"/idempotent/dags/{DAG_A}/backfill")
    match = re.search(r'<meta name="idempotent-csrf" content="([^"]+)">', page.text)
    assert match, page.text[:500]
    return match.group(1)


def _clear_with(env: UiEnv, cookie: str, csrf: str) -> Any:
    from fastapi.testclient import TestClient

    client = TestClient(env.app, cookies={"_token": cookie})
    return client.post(
        f"/idempotent/api/dags/{DAG_A}/killswitch/clear", json={}, headers={"X-Idempotent-CSRF": csrf}
    )


def test_logging_out_invalidates_the_pages_csrf_token(env: UiEnv) -> None:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    def login() -> str:
        return str(get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin")))

    session = login()
    csrf = _page_csrf(env, session)
    assert _clear_with(env, session, csrf).status_code == 200
    # Airflow's logout revokes the session's token...
    TestClient(env.app, cookies={"_token": session}).get("/api/v2/auth/logout", follow_redirects=False)
    # ...and with it the CSRF token the page had: a new login does not revive it.
    again = login()
    refused = _clear_with(env, again, csrf)
    assert refused.status_code == 403, refused.text
    assert _clear_with(env, again, _page_csrf(env, again)).status_code == 200


# --------------------------------------------------------------------------------------------
# Previews bounded by design
# --------------------------------------------------------------------------------------------


def test_the_backfill_preview_costs_the_same_queries_for_10_or_100_windows(env: UiEnv) -> None:
    """Set-based over the windows: the metadata database sees as many statements for 100 windows
    as for 10 (one per window before)."""
    from airflow import settings
    from sqlalchemy import event

    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    def cost(days: int) -> tuple[int, int]:
        statements.clear()
        to_date = (date(2026, 8, 1) + timedelta(days=days - 1)).isoformat()
        form = {**FORM, "from_date": "2026-08-01", "to_date": to_date}
        answer = _post(env, POST_ROUTES[0], json.dumps(form).encode())
        assert answer.status_code == 200, answer.text[:300]
        return answer.json()["total_in_range"], len(statements)

    event.listen(settings.engine, "before_cursor_execute", seen)
    try:
        (ten, few), (hundred, many) = cost(10), cost(100)
    finally:
        event.remove(settings.engine, "before_cursor_execute", seen)
    assert (ten, hundred) == (10, 100)
    assert many == few, (few, many)


def test_a_preview_over_the_documented_maximum_is_422_before_any_window_is_read(env: UiEnv) -> None:
    from airflow_idempotent.plugins.ui.backfills import MAX_PREVIEW

    form = {**FORM, "from_date": "1900-01-01", "to_date": "2026-09-15"}  # 46,279 daily windows
    answer = _post(env, POST_ROUTES[0], json.dumps(form).encode())
    assert answer.status_code == 422, answer.text[:300]
    assert f"this range holds more than {MAX_PREVIEW} windows" in answer.json()["detail"]
    assert "the DAG's cap is 3" in answer.json()["detail"]

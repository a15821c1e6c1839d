"""The UI pages and JSON API (airflow_idempotent/plugins/ui/) inside Airflow's real API app.

Fast: Airflow's own `create_app("core")` (so the plugin is mounted by Airflow's plugin manager,
behind Airflow's middlewares) on the throw-away metadata database, three DAGs of this file
serialized into it, a history store in an SQLite file seeded with writes (hostile strings
included), and an auth manager that is Airflow's simple one with one restriction added: the user
`outsider` may not access the DAG `ui_guarded`. Tokens are real JWTs from that auth manager.

Every route: 401 without credentials, 403 with a token Airflow rejects, 403 without access to the
DAG it names. Every query parameter and form field: hostile values rejected (422) or shown
escaped, and nothing written.
"""

from __future__ import annotations

import json
import re
import secrets
import textwrap
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

from airflow_idempotent.history.models import KillSwitch, WindowWrite
from airflow_idempotent.history.store import AttemptRecord, HistoryStore, WriteRecord
from airflow_idempotent.plugins import ui
from airflow_idempotent.plugins.ui import security
from airflow_idempotent.plugins.ui.charts import build_chart, window_series
from airflow_idempotent.plugins.ui.datamodels import (
    DAG_ID_RE,
    RUN_ID_RE,
    TABLE_RE,
    TASK_ID_RE,
    HistoryQuery,
    InputError,
)
from airflow_idempotent.plugins.ui.security import CSRF_MAX_AGE, SECURITY_HEADERS
from tests.test_intent import CONFS as INTENT_CONFS
from tests.ui_env import airflow_api_app, august_write

GUARDED = "ui_guarded"
OTHER = "ui_other"
UNGUARDED = "ui_unguarded"
TARGET = "warehouse:payouts"
OTHER_TARGET = "warehouse:other_payouts"
HOSTILE_MESSAGE = "stop condition: <script>alert('x')</script> & more"
HOSTILE_POLICY = '"><img src=x onerror=alert(1)>'
HOSTILE_ERROR = "<b>boom</b>\nTraceback ..."
UTC = timezone.utc

DAG_FILE = textwrap.dedent(
    """
    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, Param

    from airflow_idempotent.guard import GuardConfig, Thresholds

    START = pendulum.datetime(2026, 8, 1, tz="UTC")
    GUARD = GuardConfig(cap=3, measures=["amount_eur"], thresholds=Thresholds(max_shrink=0.1))
    PARAMS = {"policy_version": Param("v1", type="string", enum=["v1", "v2"])}

    for dag_id in ("ui_guarded", "ui_other"):
        params = {**PARAMS, **GUARD.param()}
        with DAG(dag_id, schedule="@daily", start_date=START, catchup=False, params=params):
            EmptyOperator(task_id="write_payouts")

    with DAG("ui_unguarded", schedule="@daily", start_date=START, catchup=False):
        EmptyOperator(task_id="noop")
    """
)

# Users: role from Airflow's simple auth manager, plus DAGs this test's manager denies them.
DENIED = {"outsider": {GUARDED}}


class ScopedAuthManager(SimpleAuthManager):
    """Airflow's simple auth manager, with per-DAG denials (what a real auth manager has)."""

    def is_authorized_dag(
        self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None
    ) -> bool:
        if details is not None and details.id in DENIED.get(user.get_name(), set()):
            return False
        return bool(
            super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
        )


# --------------------------------------------------------------------------------------------
# The app, the DAGs, the history
# --------------------------------------------------------------------------------------------


def _at(day: int, hour: int = 1) -> datetime:
    return datetime(2026, 8, day, hour, tzinfo=UTC)


def _diff(before: str, after: str, rows: int = 40, changed: int = 12) -> str:
    delta = f"{float(after) - float(before):.2f}"
    return json.dumps(
        {
            "rows_before": rows,
            "rows_after": rows,
            "row_delta": 0,
            "added": 0,
            "removed": 0,
            "changed": changed,
            "unchanged": rows - changed,
            "measures": {"amount_eur": {"before": before, "after": after, "delta": delta}},
        }
    )


def _write(day: int, run_id: str, **fields: Any) -> WriteRecord:
    values: dict[str, Any] = {
        "target": TARGET,
        "fingerprint": f"f{day}" + "0" * 62,
        "written_at": _at(day),
        "rows_deleted": 0,
        "rows_inserted": 40,
        "rows_updated": 0,
        "row_count": 40,
        "checksum": f"c{day}v1" + "a" * 20,
        "fingerprint_parts": json.dumps({"sql": "SELECT ...", "policy_version": "v1", "window": "x"}),
        "run_type": "scheduled",
        "policy_version": "v1",
    }
    values.update(fields)
    return august_write(values.pop("dag_id", GUARDED), day, run_id, **values)


def seed_history(store: HistoryStore) -> None:
    """Three windows of ui_guarded (v1, then a corrective v2 with diffs; 08-05 refused) and one of
    ui_other; hostile text in a message, a policy version and an error."""
    for day in (3, 4, 5):
        store.record(_write(day, f"scheduled__2026-08-0{day}T00:00:00+00:00"))
    for day, before, after in ((3, "1200.00", "1150.50"), (4, "1300.00", "1240.25")):
        store.record(
            _write(
                day,
                f"backfill__2026-08-0{day}T00:00:00+00:00",
                written_at=_at(day + 20),
                run_type="backfill",
                semantics="corrective",
                policy_version="v2",
                checksum=f"c{day}v2" + "b" * 20,
                fingerprint=f"g{day}" + "1" * 62,
                rows_deleted=40,
                diff=_diff(before, after),
            )
        )
    store.record(
        _write(
            5,
            "backfill__2026-08-05T00:00:00+00:00",
            written_at=_at(25),
            run_type="backfill",
            status="refused",
            semantics="corrective",
            policy_version=HOSTILE_POLICY,
            checksum=None,
            diff=_diff("1000.00", "500.00", changed=40),
            message=HOSTILE_MESSAGE,
        )
    )
    store.record(
        AttemptRecord(
            dag_id=GUARDED,
            run_id="backfill__2026-08-05T00:00:00+00:00",
            task_id="write_payouts",
            map_index=-1,
            try_number=1,
            event="failed",
            at=_at(25, 2),
            state="failed",
            source="worker",
            error=HOSTILE_ERROR,
        )
    )
    store.record(_write(3, "scheduled__2026-08-03T00:00:00+00:00", dag_id=OTHER, target=OTHER_TARGET))
    seed_approval(store)


def seed_approval(store: HistoryStore) -> None:
    """The refused 08-05 window waited for a person (on_breach="approve"), who rejected it."""
    from airflow_idempotent.history import approvals
    from airflow_idempotent.identity import AttemptIdentity

    who = AttemptIdentity(GUARDED, "backfill__2026-08-05T00:00:00+00:00", "write_payouts", -1, 1, "backfill")
    pending = approvals.PendingApproval(
        target=TARGET,
        window_label="2026-08-05",
        status=approvals.PENDING,
        mode="swap",
        semantics="corrective",
        policy_version="v2",
        stage_table="_idem_apr_0123456789abcdef",
        stage_rows=40,
        stage_checksum="v2:40:1",
        target_rows=40,
        target_checksum="v2:40:2",
        diff=json.loads(_diff("1000.00", "500.00", changed=40)),
        breaches=["changed 40 rows > max_changed_rows 10"],
        requested_at=_at(25),
        expires_at=_at(26),
    )
    approvals.request(store, who, _at(5, 0), _at(6, 0), pending)
    approvals.decide(store, who, approvals.REJECTED, "carol", "<i>not signed off</i>")


@pytest.fixture(scope="module")
def env(airflow_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Airflow's API app with the plugin mounted, the DAGs in its database, a seeded history."""
    from fastapi.testclient import TestClient

    store = HistoryStore(engine=sa.create_engine(f"sqlite:///{tmp_path_factory.mktemp('ui_history')}/h.db"))
    seed_history(store)
    users = {"admin": "admin", "outsider": "op", "viewer": "viewer"}
    with airflow_api_app(tmp_path_factory, DAG_FILE, f"{__name__}.ScopedAuthManager", users, store) as (
        app,
        tokens,
        dags,
    ):
        assert {GUARDED, OTHER, UNGUARDED} <= dags
        yield {"app": app, "client": TestClient(app), "store": store, "tokens": tokens}


def bearer(env: dict[str, Any], user: str = "admin") -> dict[str, str]:
    return {"Authorization": f"Bearer {env['tokens'][user]}"}


def call(env: dict[str, Any], method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
    """One request; `cookies=` makes it from a browser-like client holding those cookies."""
    from fastapi.testclient import TestClient

    cookies = kwargs.pop("cookies", None)
    client = env["client"] if cookies is None else TestClient(env["app"], cookies=cookies)
    if body is not None and "content" not in kwargs:
        kwargs["json"] = body
    return client.request(method, path, **kwargs)


def counts(env: dict[str, Any]) -> tuple[int, int, int]:
    """(history writes, kill switch rows, Airflow backfills): what a refused request must not change."""
    from airflow.models.backfill import Backfill
    from airflow.utils.session import create_session

    with env["store"].engine.connect() as conn:
        writes = conn.execute(sa.select(sa.func.count()).select_from(WindowWrite.__table__)).scalar_one()
        switches = conn.execute(sa.select(sa.func.count()).select_from(KillSwitch.__table__)).scalar_one()
    with create_session() as session:
        backfills = session.scalar(sa.select(sa.func.count()).select_from(Backfill))
    return writes, switches, int(backfills or 0)


RUN_QS = "run_id=backfill__2026-08-03T00:00:00%2B00:00&task_id=write_payouts&map_index=-1"
FORM = {
    "from_date": "2026-08-10",
    "to_date": "2026-08-11",
    "semantics": "corrective",
    "reason": "contract fix: v2 rates",
    "policy_version": "v2",
}

RERUN_QS = "window_start=2026-08-03T00:00:00&window_end=2026-08-04T00:00:00"
RERUN_FORM = {
    "window_start": "2026-08-03T00:00:00",
    "window_end": "2026-08-04T00:00:00",
    "conf": {"policy_version": "v2"},
}

# (method, path, body, DAG it names or None): every route of the app.
ROUTES: list[tuple[str, str, Any, str | None]] = [
    ("GET", "/idempotent/", None, None),
    ("GET", "/idempotent/history", None, None),
    ("GET", f"/idempotent/history?dag_id={GUARDED}", None, GUARDED),
    ("GET", f"/idempotent/dags/{GUARDED}/history", None, GUARDED),
    ("GET", f"/idempotent/dags/{GUARDED}/backfill", None, GUARDED),
    ("GET", f"/idempotent/dags/{GUARDED}/attempt?{RUN_QS}", None, GUARDED),
    ("GET", "/idempotent/static/idempotent.css", None, None),
    ("GET", "/idempotent/static/backfill.js", None, None),
    ("GET", "/idempotent/api/history", None, None),
    ("GET", f"/idempotent/api/history?dag_id={GUARDED}", None, GUARDED),
    ("GET", f"/idempotent/api/dags/{GUARDED}/history", None, GUARDED),
    ("GET", f"/idempotent/api/dags/{GUARDED}/guard", None, GUARDED),
    ("POST", f"/idempotent/api/dags/{GUARDED}/backfills/preview", FORM, GUARDED),
    ("POST", f"/idempotent/api/dags/{GUARDED}/backfills", FORM, GUARDED),
    ("GET", f"/idempotent/api/dags/{GUARDED}/backfills/1", None, GUARDED),
    ("POST", f"/idempotent/api/dags/{GUARDED}/backfills/1/stop", {"reason": "x"}, GUARDED),
    ("POST", f"/idempotent/api/dags/{GUARDED}/killswitch/clear", {}, GUARDED),
    ("GET", f"/idempotent/api/dags/{GUARDED}/attempts?{RUN_QS}", None, GUARDED),
    ("GET", f"/idempotent/dags/{GUARDED}/rerun?{RERUN_QS}", None, GUARDED),
    ("POST", f"/idempotent/api/dags/{GUARDED}/rerun/preview", RERUN_FORM, GUARDED),
    ("GET", "/idempotent/api/openapi.json", None, None),
]
ROUTE_IDS = [
    f"{m} {p.split('?')[0].removeprefix('/idempotent')}" + ("?dag" if "?dag_id" in p else "")
    for m, p, _, _ in ROUTES
]


def _template(path: str) -> str:
    bare = path.split("?")[0].removeprefix("/idempotent")
    bare = bare.replace(GUARDED, "{dag_id}").replace("/backfills/1", "/backfills/{backfill_id}")
    return bare.replace("/static/idempotent.css", "/static/{name}").replace(
        "/static/backfill.js", "/static/{name}"
    )


def test_the_routes_under_test_are_every_route_of_the_app() -> None:
    declared = {(m, r.path_format) for r in ui.app.routes if hasattr(r, "methods") for m in r.methods or ()}
    declared -= {("HEAD", p) for _, p in declared}
    tested = {(m, _template(p)) for m, p, _, _ in ROUTES}
    assert tested == declared


def test_the_plugin_mounts_the_app_and_adds_the_views_to_airflows_ui(env: dict[str, Any]) -> None:
    from airflow_idempotent.plugins.listener import IdempotentPlugin

    assert IdempotentPlugin.fastapi_apps == [
        {"app": ui.app, "url_prefix": "/idempotent", "name": "airflow-idempotent UI"}
    ]
    views = {v["url_route"]: v for v in IdempotentPlugin.external_views}
    assert {v["destination"] for v in views.values()} == {"nav", "dag", "task_instance"}
    assert all(not v["href"].startswith("/") for v in views.values())  # relative to Airflow's base URL
    assert views["idempotent-history"]["category"] == "browse"
    assert "{MAP_INDEX}" in views["idempotent-attempt"]["href"]
    mounts = [r for r in env["app"].routes if getattr(r, "path", None) == "/idempotent"]
    assert len(mounts) == 1 and mounts[0].app is ui.app
    # What Airflow's UI reads to build its navigation and tabs.
    plugins = call(env, "GET", "/api/v2/plugins", headers=bearer(env)).json()["plugins"]
    mine = next(p for p in plugins if p["name"] == "idempotent")
    assert {v["url_route"] for v in mine["external_views"]} == set(views)
    assert mine["fastapi_apps"][0]["url_prefix"] == "/idempotent"


def test_a_process_that_loads_the_plugin_for_its_listener_does_not_build_the_app() -> None:
    """Tasks and the scheduler load the plugin for its listener; only the API server reads
    fastapi_apps. A fresh interpreter shows what loading the plugin imports."""
    import subprocess
    import sys

    probe = textwrap.dedent(
        """
        import json, sys
        from airflow_idempotent.plugins.listener import IdempotentPlugin
        plugin = IdempotentPlugin()
        before = sorted(m for m in sys.modules if m.startswith("airflow_idempotent.plugins.ui.")
                        or m in ("fastapi", "airflow_idempotent.effects"))
        views = len(plugin.external_views)
        apps = plugin.fastapi_apps
        after = "airflow_idempotent.plugins.ui.application" in sys.modules
        print(json.dumps({"before": before, "views": views, "prefix": apps[0]["url_prefix"], "after": after}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "before": ["airflow_idempotent.plugins.ui.views"],
        "views": 4,
        "prefix": "/idempotent",
        "after": True,
    }, got


# --------------------------------------------------------------------------------------------
# 401 / 403 on every route
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body", "dag"), ROUTES, ids=ROUTE_IDS)
def test_every_route_answers_401_without_credentials(
    env: dict[str, Any], method: str, path: str, body: Any, dag: str | None
) -> None:
    before = counts(env)
    answer = call(env, method, path, body)
    assert answer.status_code == 401, answer.text
    # Malformed JSON does not get past authentication either.
    if method == "POST":
        answer = call(env, method, path, content=b"{not json", headers={"Content-Type": "application/json"})
        assert answer.status_code == 401, answer.text
    assert counts(env) == before


@pytest.mark.parametrize(("method", "path", "body", "dag"), ROUTES, ids=ROUTE_IDS)
def test_every_route_answers_403_for_a_token_airflow_rejects(
    env: dict[str, Any], method: str, path: str, body: Any, dag: str | None
) -> None:
    import jwt

    forged = jwt.encode(
        {"sub": "admin", "role": "admin", "exp": 4102444800}, secrets.token_hex(32), algorithm="HS512"
    )
    before = counts(env)
    for auth in ({"headers": {"Authorization": f"Bearer {forged}"}}, {"cookies": {"_token": forged}}):
        answer = call(env, method, path, body, **auth)
        assert answer.status_code == 403, answer.text
    assert counts(env) == before


@pytest.mark.parametrize(("method", "path", "body", "dag"), ROUTES, ids=ROUTE_IDS)
def test_every_dag_route_answers_403_without_access_to_that_dag(
    env: dict[str, Any], method: str, path: str, body: Any, dag: str | None
) -> None:
    before = counts(env)
    answer = call(env, method, path, body, headers=bearer(env, "outsider"))
    if dag is not None:
        assert answer.status_code == 403, answer.text
        assert GUARDED not in answer.text
    else:
        assert answer.status_code in (200, 303), answer.text
        assert TARGET not in answer.text and HOSTILE_MESSAGE not in answer.text
    assert counts(env) == before


def test_without_a_dag_filter_a_user_sees_only_the_dags_they_may_read(env: dict[str, Any]) -> None:
    answer = call(env, "GET", "/idempotent/api/history", headers=bearer(env, "outsider")).json()
    assert {w["dag_id"] for win in answer["windows"] for w in win["writes"]} == {OTHER}
    page = call(env, "GET", "/idempotent/history", headers=bearer(env, "outsider")).text
    assert "other_payouts" in page and "ui_guarded" not in page
    everything = call(env, "GET", "/idempotent/api/history", headers=bearer(env)).json()
    assert {w["dag_id"] for win in everything["windows"] for w in win["writes"]} == {GUARDED, OTHER}


@pytest.mark.parametrize(
    ("method", "path", "body", "dag"),
    [r for r in ROUTES if r[0] == "POST"],
    ids=[i for i, r in zip(ROUTE_IDS, ROUTES, strict=True) if r[0] == "POST"],
)
def test_a_viewer_may_read_but_not_preview_create_stop_or_clear(
    env: dict[str, Any], method: str, path: str, body: Any, dag: str | None
) -> None:
    before = counts(env)
    answer = call(env, method, path, body, headers=bearer(env, "viewer"))
    assert answer.status_code == 403, answer.text
    assert counts(env) == before
    page = call(env, "GET", f"/idempotent/dags/{GUARDED}/history", headers=bearer(env, "viewer"))
    assert page.status_code == 200


# --------------------------------------------------------------------------------------------
# CSRF
# --------------------------------------------------------------------------------------------


def page_token(env: dict[str, Any], user: str = "admin") -> str:
    page = call(env, "GET", f"/idempotent/dags/{GUARDED}/backfill", cookies={"_token": env["tokens"][user]})
    match = re.search(r'<meta name="idempotent-csrf" content="([^"]+)">', page.text)
    assert match, page.text[:500]
    return match.group(1)


def test_a_browser_session_must_send_the_pages_csrf_token(env: dict[str, Any]) -> None:
    from airflow_idempotent.guard.killswitch import active_switches, set_switch

    store = env["store"]
    clear = f"/idempotent/api/dags/{GUARDED}/killswitch/clear"
    cookie = {"_token": env["tokens"]["admin"]}
    token = page_token(env)
    set_switch(store, "backfill", GUARDED, "csrf test", by="test")
    refused: list[tuple[dict[str, Any], int]] = [
        ({}, 403),  # no token
        ({"X-Idempotent-CSRF": token[:-2] + "xx"}, 403),  # tampered
        ({"X-Idempotent-CSRF": page_token(env, "viewer")}, 403),  # another user's
        ({"X-Idempotent-CSRF": token, "Sec-Fetch-Site": "cross-site"}, 403),
        ({"X-Idempotent-CSRF": token, "Origin": "https://evil.example"}, 403),
        ({"X-Idempotent-CSRF": token, "Origin": "null"}, 403),
        ({"X-Idempotent-CSRF": token, "Content-Type": "text/plain"}, 415),
        ({"X-Idempotent-CSRF": token, "Content-Type": "application/x-www-form-urlencoded"}, 415),
    ]
    for headers, status in refused:
        kwargs: dict[str, Any] = {"cookies": cookie, "headers": headers}
        if "Content-Type" in headers:
            kwargs["content"] = b"{}"
        answer = call(env, "POST", clear, {} if "content" not in kwargs else None, **kwargs)
        assert answer.status_code == status, (headers, answer.text)
        assert active_switches(store, GUARDED, backfill=True), headers  # nothing was cleared
    same_origin = {"X-Idempotent-CSRF": token, "Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    answer = call(env, "POST", clear, {}, cookies=cookie, headers=same_origin)
    assert answer.status_code == 200 and answer.json() == {"cleared": True}
    # A script authenticating with a Bearer token sends no CSRF token (no browser adds it by itself).
    set_switch(store, "backfill", GUARDED, "csrf test", by="test")
    assert call(env, "POST", clear, {}, headers=bearer(env)).json() == {"cleared": True}


def test_the_csrf_token_expires(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import itsdangerous.timed

    token = page_token(env)
    real = itsdangerous.timed.time.time
    monkeypatch.setattr(itsdangerous.timed.time, "time", lambda: real() + CSRF_MAX_AGE + 60)
    answer = call(
        env,
        "POST",
        f"/idempotent/api/dags/{GUARDED}/killswitch/clear",
        {},
        cookies={"_token": env["tokens"]["admin"]},
        headers={"X-Idempotent-CSRF": token},
    )
    assert answer.status_code == 403 and "expired" in answer.json()["detail"]


# --------------------------------------------------------------------------------------------
# The history page and its API
# --------------------------------------------------------------------------------------------


def test_the_history_page_shows_every_write_attempt_diff_and_the_chart(env: dict[str, Any]) -> None:
    answer = call(env, "GET", f"/idempotent/dags/{GUARDED}/history", headers=bearer(env))
    assert answer.status_code == 200
    html = answer.text
    for header, value in SECURITY_HEADERS.items():
        assert answer.headers[header] == value
    # Every window, every write with ordinal, time, run type, rows, checksum, fingerprint, ...
    for text in ("2026-08-03", "2026-08-04", "2026-08-05", "2026-08-24 01:00:00Z", "backfill", "scheduled"):
        assert text in html
    assert "c3v2bbbbbbbb" in html and "g31111111111" in html  # short checksum and fingerprint
    assert 'title="c3v2' + "b" * 20 + '"' in html  # the whole checksum on hover
    assert "corrective" in html and ">v2<" in html and ">v1<" in html
    assert "+0 \N{MINUS SIGN}0 ~12 =28" in html and "amount_eur 1,200.00 → 1,150.50 (-49.50)" in html
    assert 'class="flag flag-refused"' in html and 'class="flag flag-failed"' in html
    assert "3 windows." in html
    # The chart: amount_eur per dataset version (version 1 = before the corrective, 2 = after).
    figure = html.split('<figure class="chart" data-measure="amount_eur">')[1].split("</figure>")[0]
    assert figure.count('<rect class="bar v1"') == 2 and figure.count('<rect class="bar v2"') == 2
    assert '<figure class="chart" data-measure="rows">' in html
    assert "<title>2026-08-03 · version 2: 1,150.50</title>" in html
    assert '<td class="n change">-49.50</td>' in html
    # Stored hostile text is shown, escaped.
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;b&gt;boom&lt;/b&gt;" in html
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>boom" not in html
    # The window's approval: who decided, and why (escaped).
    assert (
        "approval: rejected by carol at " in html
        and ": &lt;i&gt;not signed off&lt;/i&gt; (backfill__" in html
    )


def test_the_history_api_filters_by_dag_table_window_range_and_flag(env: dict[str, Any]) -> None:
    def windows(query: str) -> list[dict[str, Any]]:
        answer = call(env, "GET", f"/idempotent/api/history?{query}", headers=bearer(env))
        assert answer.status_code == 200, answer.text
        return list(answer.json()["windows"])

    assert [w["window"]["label"] for w in windows(f"dag_id={GUARDED}")] == [
        "2026-08-03",
        "2026-08-04",
        "2026-08-05",
    ]
    assert [w["target"] for w in windows("table=other_payouts")] == [OTHER_TARGET]
    assert [w["window"]["label"] for w in windows(f"dag_id={GUARDED}&from=2026-08-04&to=2026-08-04")] == [
        "2026-08-04"
    ]
    failed = windows("flag=failed")
    assert [w["window"]["label"] for w in failed] == ["2026-08-05"]
    assert failed[0]["flags"] == ["failed", "refused"]
    assert windows(f"dag_id={GUARDED}&limit=1")[0]["window"]["label"] == "2026-08-05"
    full = call(env, "GET", f"/idempotent/api/dags/{GUARDED}/history", headers=bearer(env)).json()
    write = full["windows"][0]["writes"][1]
    assert (write["ordinal"], write["dataset_version"], write["policy_version"]) == (2, 2, "v2")
    assert write["diff"]["measures"]["amount_eur"] == {
        "before": "1200.00",
        "after": "1150.50",
        "delta": "-49.50",
    }
    chart = full["charts"][0]
    assert chart["measure"] == "amount_eur" and chart["versions"] == ["version 1", "version 2"]
    assert chart["windows"][0] == {
        "label": "2026-08-03",
        "cells": ["1,200.00", "1,150.50"],
        "change": "-49.50",
    }
    assert full["charts"][-1]["measure"] == "rows"


# --------------------------------------------------------------------------------------------
# Hostile input: rejected (422) or escaped; nothing written
# --------------------------------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "' OR 1=1 --",
    "ui_guarded; DROP TABLE idem_window_write",
    "../../etc/passwd",
    "{{7*7}}",
    "x" * 600,
    "a\x00b",
    "line\nbreak",
    "2026-13-45",
    "-1",
    "1e309",
]
HISTORY_FIELDS = ["dag_id", "task_id", "table", "from", "to", "flag", "limit"]


@pytest.mark.parametrize("name", HISTORY_FIELDS)
def test_hostile_history_query_parameters_are_rejected(env: dict[str, Any], name: str) -> None:
    """Each value is refused (422; an HTML page for the pages), unless it is a well-formed id
    (e.g. "-1" is a valid DAG id): then it simply matches nothing."""
    pattern = {"dag_id": DAG_ID_RE, "task_id": TASK_ID_RE, "table": TABLE_RE}.get(name)
    before = counts(env)
    for value in HOSTILE:
        for path in ("/idempotent/history", "/idempotent/api/history", f"/idempotent/dags/{GUARDED}/history"):
            if name == "dag_id" and "/dags/" in path:
                continue
            answer = call(env, "GET", path, params={name: value}, headers=bearer(env))
            if pattern is not None and pattern.match(value):
                assert answer.status_code == 200, (name, value, path, answer.text[:300])
                assert "/api/" not in path or answer.json()["windows"] == []
            else:
                assert answer.status_code == 422, (name, value, path, answer.text[:300])
                if "/api/" not in path:
                    assert "text/html" in answer.headers["content-type"]
                    assert "nothing was read" in answer.text or "not a DAG id" in answer.text
            assert "<script>alert" not in answer.text and "<img src=x" not in answer.text
    assert counts(env) == before


def test_hostile_attempt_and_path_parameters_are_rejected(env: dict[str, Any]) -> None:
    before = counts(env)
    good = {"run_id": "backfill__2026-08-03T00:00:00+00:00", "task_id": "write_payouts", "map_index": "-1"}
    for name in good:
        for value in HOSTILE:
            if name == "map_index" and value == "-1":
                continue
            pattern = RUN_ID_RE if name == "run_id" else TASK_ID_RE if name == "task_id" else None
            for path in (f"/idempotent/dags/{GUARDED}/attempt", f"/idempotent/api/dags/{GUARDED}/attempts"):
                answer = call(env, "GET", path, params={**good, name: value}, headers=bearer(env))
                expected = (
                    200 if pattern is not None and pattern.match(value) else 422
                )  # well-formed: no data
                assert answer.status_code == expected, (name, value, answer.text)
                assert "<script>alert" not in answer.text and "<img src=x" not in answer.text
    for value in ("<script>", "a;b", "x" * 300, "%3Cscript%3E"):
        for template in (
            "/idempotent/dags/{}/history",
            "/idempotent/api/dags/{}/guard",
            "/idempotent/dags/{}/backfill",
        ):
            answer = call(env, "GET", template.format(value), headers=bearer(env))
            assert answer.status_code in (404, 422), (value, answer.text)
            assert "<script>" not in answer.text
    for value in ("1.0", "-1", "abc", "1e3", "9" * 40):
        answer = call(env, "GET", f"/idempotent/api/dags/{GUARDED}/backfills/{value}", headers=bearer(env))
        assert answer.status_code in (404, 422), (value, answer.text)
    answer = call(env, "GET", "/idempotent/static/..%2F..%2Fui.py", headers=bearer(env))
    assert answer.status_code == 404
    assert counts(env) == before


# Values each form field must refuse (422). Free text (reason) must also take markup as data.
BAD_FORM_VALUES: dict[str, list[Any]] = {
    "from_date": ["last tuesday", "2026-13-45", "<script>", 20260810, None, "0001-01-01", "9999-01-01"],
    "to_date": ["' OR 1=1 --", "2026-08-32", [], {}],
    "semantics": ["delete", "<script>", "", 1, None],
    "reason": ["", "   ", "a\x00b", "line\nbreak", "x" * 501, 7, ["x"], {"a": 1}, None],
    "policy_version": ["v2; DROP TABLE payouts", "<img src=x>", "", "x" * 65, " v2", 2, True],
    "approve_windows": [0, -1, "4", 4.5, True, 10**9],
    "max_active_runs": [0, 65, "2", 1.5, None],
    "reprocess_behavior": ["all", "<script>", 1],
    "run_backwards": ["yes", 1, None],
    "thresholds": ["strict", [1], {"max_rows": 5}],
    "thresholds.max_changed_rows": [-1, "5", 1.5, True, 10**13],
    "thresholds.max_removed_rows": [-3, "x"],
    "thresholds.max_added_rows": [-1, "1; DROP"],
    "thresholds.max_shrink": [-0.1, 1.5, "0.1", True, float("nan"), float("inf")],
    "thresholds.max_measure_rel_change": [
        "0.2",
        {"amount_eur; DROP": 0.2},
        {"<b>": 0.2},
        {"amount_eur": -1},
        {"amount_eur": "0.2"},
    ],
    "thresholds.max_measure_abs_change": [{"amount_eur": float("inf")}, {"": 1}, [0.2]],
    "unknown_field": ["anything"],
}


def _with(form: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    body = json.loads(json.dumps(form))
    if name.startswith("thresholds."):
        body["thresholds"] = {name.split(".", 1)[1]: value}
    else:
        body[name] = value
    return body


@pytest.mark.parametrize("name", list(BAD_FORM_VALUES))
def test_hostile_backfill_form_fields_are_rejected_and_nothing_is_created(
    env: dict[str, Any], name: str
) -> None:
    before = counts(env)
    for value in BAD_FORM_VALUES[name]:
        body = _with(FORM, name, value)
        for route in ("backfills/preview", "backfills"):
            raw = json.dumps(body, allow_nan=True).encode()
            answer = call(
                env,
                "POST",
                f"/idempotent/api/dags/{GUARDED}/{route}",
                content=raw,
                headers={**bearer(env), "Content-Type": "application/json"},
            )
            assert answer.status_code == 422, (name, value, route, answer.text[:300])
            detail = answer.json()["detail"]
            assert isinstance(detail, list) and detail, detail
    assert counts(env) == before


@pytest.mark.parametrize("path", [p for m, p, _, _ in ROUTES if m == "POST"])
def test_a_body_that_is_not_json_is_refused(env: dict[str, Any], path: str) -> None:
    before = counts(env)
    for raw in (b"{not json", b"\xff\xfe", b"[1, 2]", b'"text"', b"null"):
        answer = call(
            env, "POST", path, content=raw, headers={**bearer(env), "Content-Type": "application/json"}
        )
        assert answer.status_code == 422, (raw, answer.text)
    assert counts(env) == before


def test_markup_in_free_text_is_data_not_html(env: dict[str, Any]) -> None:
    form = {**FORM, "reason": "<script>alert(1)</script> & v2 rates"}
    answer = call(env, "POST", f"/idempotent/api/dags/{GUARDED}/backfills/preview", form, headers=bearer(env))
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["conf"]["reason"] == form["reason"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"reason": ""},
        {"reason": "a\x07"},
        {"reason": "x" * 501},
        {"reason": 5},
        {"reason": "ok", "scope": "global"},
    ],
)
def test_hostile_stop_and_clear_bodies_are_rejected_and_nothing_is_set(
    env: dict[str, Any], body: Any
) -> None:
    before = counts(env)
    answer = call(env, "POST", f"/idempotent/api/dags/{GUARDED}/backfills/1/stop", body, headers=bearer(env))
    assert answer.status_code in (404, 422), answer.text  # 404: no backfill 1 yet, also nothing set
    answer = call(
        env,
        "POST",
        f"/idempotent/api/dags/{GUARDED}/killswitch/clear",
        {"dag_id": OTHER},
        headers=bearer(env),
    )
    assert answer.status_code == 422
    assert counts(env) == before


# --------------------------------------------------------------------------------------------
# Preview, create, watch, stop
# --------------------------------------------------------------------------------------------


def preview(env: dict[str, Any], dag_id: str = GUARDED, **change: Any) -> dict[str, Any]:
    answer = call(
        env,
        "POST",
        f"/idempotent/api/dags/{dag_id}/backfills/preview",
        {**FORM, **change},
        headers=bearer(env),
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_preview_lists_windows_existing_data_and_the_cap(env: dict[str, Any]) -> None:
    before = counts(env)
    p = preview(env, from_date="2026-08-03", to_date="2026-08-05")
    assert (p["count"], p["total_in_range"], p["cap"], p["over_cap"]) == (3, 3, 3, False)
    assert [w["label"] for w in p["windows"]] == ["2026-08-03", "2026-08-04", "2026-08-05"]
    existing = {w["label"]: w["existing"] for w in p["windows"]}
    assert [(e["table"], e["policy_version"], e["dataset_version"]) for e in existing["2026-08-03"]] == [
        ("payouts", "v2", 2)
    ]
    assert [(e["policy_version"], e["dataset_version"]) for e in existing["2026-08-05"]] == [
        ("v1", 1)
    ]  # refusal: not data
    assert p["refusal"] is None and p["airflow_refusal"] is None and p["can_submit"] is True
    assert p["conf"] == {**{k: FORM[k] for k in ("semantics", "reason", "policy_version")}}
    assert p["effective_thresholds"]["max_shrink"] == 0.1
    assert counts(env) == before

    over = preview(env, from_date="2026-08-03", to_date="2026-08-06")
    assert (over["count"], over["over_cap"], over["approval_needed"], over["can_submit"]) == (
        4,
        True,
        4,
        False,
    )
    assert over["refusal"] == (
        "this backfill covers 4 windows, over the DAG's cap of 3: split it, or approve exactly this count "
        'by adding "approve_windows": 4 to the conf.'
    )
    assert preview(env, from_date="2026-08-03", to_date="2026-08-06", approve_windows=4)["refusal"] is None

    today = datetime.now(UTC).date()
    open_ = preview(env, from_date=(today - timedelta(days=1)).isoformat(), to_date=today.isoformat())
    assert "have not closed yet" in open_["refusal"] and not open_["can_submit"]
    no_policy = {k: v for k, v in FORM.items() if k != "policy_version"}
    answer = call(
        env, "POST", f"/idempotent/api/dags/{GUARDED}/backfills/preview", no_policy, headers=bearer(env)
    )
    assert 'add "policy_version" to the conf' in answer.json()["refusal"]
    thresholds = preview(
        env, thresholds={"max_measure_rel_change": {"amount_eur": 0.05}, "max_changed_rows": 10}
    )
    assert thresholds["conf"]["thresholds"] == {
        "max_changed_rows": 10,
        "max_measure_rel_change": {"amount_eur": 0.05},
    }
    assert thresholds["effective_thresholds"]["max_measure_rel_change"] == {"amount_eur": 0.05}
    unguarded = preview(env, UNGUARDED)
    assert "declares no idempotent_guard" in unguarded["refusal"] and not unguarded["can_submit"]
    future = preview(
        env,
        from_date=(today + timedelta(days=3)).isoformat(),
        to_date=(today + timedelta(days=4)).isoformat(),
    )
    assert future["airflow_refusal"] == "Backfill cannot be executed for future dates."
    assert counts(env) == before


def test_a_guarded_backfill_is_created_watched_and_stopped(env: dict[str, Any]) -> None:
    from airflow.models.backfill import Backfill
    from airflow.utils.session import create_session

    from airflow_idempotent.guard.killswitch import active_switches

    store = env["store"]
    writes, switches, backfills = counts(env)
    # A refusal is the guard's message, and creates nothing.
    over = call(
        env,
        "POST",
        f"/idempotent/api/dags/{GUARDED}/backfills",
        {**FORM, "to_date": "2026-08-14"},
        headers=bearer(env),
    )
    assert over.status_code == 422 and over.json()["detail"].startswith("this backfill covers 5 windows")
    assert counts(env) == (writes, switches, backfills)

    created = call(env, "POST", f"/idempotent/api/dags/{GUARDED}/backfills", FORM, headers=bearer(env))
    assert created.status_code == 200, created.text
    backfill = created.json()["backfill"]
    assert backfill["dag_run_conf"] == {k: FORM[k] for k in ("semantics", "reason", "policy_version")}
    bid = backfill["id"]
    with create_session() as session:
        row = session.get(Backfill, bid)
        assert row is not None and row.triggering_user_name == "admin" and row.dag_id == GUARDED
    # Another backfill while this one runs: Airflow's own answer.
    again = call(env, "POST", f"/idempotent/api/dags/{GUARDED}/backfills", FORM, headers=bearer(env))
    assert again.status_code == 409 and "already a running backfill" in again.json()["detail"]

    status_path = f"/idempotent/api/dags/{GUARDED}/backfills/{bid}"
    status = call(env, "GET", status_path, headers=bearer(env)).json()
    assert status["phase"] == "running" and status["states"] == {"queued": 2}
    assert [w["label"] for w in status["windows"]] == ["2026-08-10", "2026-08-11"]
    # A window lands: its write and diff appear in the status.
    run_id = status["windows"][0]["run_id"]
    store.record(
        _write(
            10,
            run_id,
            run_type="backfill",
            semantics="corrective",
            policy_version="v2",
            diff=_diff("900.00", "850.00"),
            written_at=datetime.now(UTC),
        )
    )
    # A write of that run from before this backfill (an earlier try) is not this backfill's.
    store.record(_write(10, run_id, try_number=0, written_at=_at(10)))
    landed = call(env, "GET", status_path, headers=bearer(env)).json()["windows"][0]["writes"]
    assert [(w["status"], w["policy_version"]) for w in landed] == [("written", "v2")]
    assert landed[0]["diff"]["measures"]["amount_eur"]["after"] == "850.00"
    # The backfill of another DAG is not reachable through this DAG's path.
    assert (
        call(env, "GET", f"/idempotent/api/dags/{OTHER}/backfills/{bid}", headers=bearer(env)).status_code
        == 404
    )
    assert (
        call(
            env,
            "POST",
            f"/idempotent/api/dags/{OTHER}/backfills/{bid}/stop",
            {"reason": "x"},
            headers=bearer(env),
        ).status_code
        == 404
    )

    stopped = call(
        env, "POST", f"{status_path}/stop", {"reason": "breach on 2026-08-10 <b>"}, headers=bearer(env)
    )
    assert stopped.status_code == 200, stopped.text
    body = stopped.json()
    assert body["phase"] == "stopped" and body["backfill"]["is_paused"] is True
    switch = active_switches(store, GUARDED, backfill=True)
    assert [(s.scope, s.reason, s.set_by) for s in switch] == [
        ("backfill", "breach on 2026-08-10 <b>", "admin (UI)")
    ]
    assert body["switches"][0]["reason"] == "breach on 2026-08-10 <b>"
    # While the switch is on, the page refuses a new backfill (every window would refuse).
    blocked = preview(env, from_date="2026-08-20", to_date="2026-08-20")
    assert any("kill switch" in b for b in blocked["blocked"]) and not blocked["can_submit"]
    # The backfill page shows the switch, escaped.
    page = call(env, "GET", f"/idempotent/dags/{GUARDED}/backfill", headers=bearer(env)).text
    assert "breach on 2026-08-10 &lt;b&gt;" in page and "<b>" not in page.split("<main>")[1]
    # The audit log (Airflow's Event Log) records who created and who stopped.
    from airflow.models import Log

    with create_session() as session:
        events = session.scalars(sa.select(Log.event).where(Log.dag_id == GUARDED)).all()
    assert {"idempotent_create_backfill", "idempotent_stop_backfill"} <= set(events)

    cleared = call(env, "POST", f"/idempotent/api/dags/{GUARDED}/killswitch/clear", {}, headers=bearer(env))
    assert cleared.json() == {"cleared": True} and not active_switches(store, GUARDED, backfill=True)
    # Cancel through Airflow's own route, so the next test may create one.
    assert call(env, "PUT", f"/api/v2/backfills/{bid}/cancel", headers=bearer(env)).status_code == 200
    done = call(env, "GET", status_path, headers=bearer(env)).json()
    assert done["finished"] is True and done["phase"] == "completed"
    assert (
        call(env, "POST", f"{status_path}/stop", {"reason": "late"}, headers=bearer(env)).status_code == 409
    )


def test_the_backfill_page_embeds_its_data_safely(env: dict[str, Any]) -> None:
    answer = call(env, "GET", f"/idempotent/dags/{GUARDED}/backfill", headers=bearer(env))
    assert answer.status_code == 200
    html = answer.text
    data = json.loads(
        re.search(r'<script type="application/json" id="idem-data">(.*?)</script>', html, re.S).group(1)
    )
    assert data["dag_id"] == GUARDED and data["root"] == "/idempotent" and data["guard"]["cap"] == 3
    assert '<script src="/idempotent/static/backfill.js"></script>' in html
    assert 'name="rel_amount_eur"' in html  # a stop condition per declared measure
    assert "<script>" not in html.replace('<script type="application/json" id="idem-data">', "")
    unguarded = call(env, "GET", f"/idempotent/dags/{UNGUARDED}/backfill", headers=bearer(env)).text
    assert "not a guarded DAG" in unguarded and "backfill.js" not in unguarded
    missing = call(env, "GET", "/idempotent/dags/no_such_dag/backfill", headers=bearer(env))
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]


# --------------------------------------------------------------------------------------------
# The attempt view
# --------------------------------------------------------------------------------------------


def test_the_attempt_view_shows_that_attempts_write_diff_and_fingerprint(env: dict[str, Any]) -> None:
    qs = {
        "run_id": "backfill__2026-08-05T00:00:00+00:00",
        "task_id": "write_payouts",
        "map_index": "{MAP_INDEX}",
    }
    answer = call(env, "GET", f"/idempotent/dags/{GUARDED}/attempt", params=qs, headers=bearer(env))
    assert answer.status_code == 200, answer.text
    html = answer.text
    assert "f5" + "0" * 62 in html  # the whole fingerprint
    assert "&#34;policy_version&#34;: &#34;v1&#34;" in html  # its parts, pretty-printed
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html and "<script>alert" not in html
    assert ">1,000.00<" in html and ">500.00<" in html and ">-500.00<" in html  # the diff's measure
    assert "&lt;b&gt;boom&lt;/b&gt;" in html  # the failed attempt's error, escaped
    # The placeholder is the page link's (Airflow's tab); the API takes the integer its document says.
    api = f"/idempotent/api/dags/{GUARDED}/attempts"
    assert call(env, "GET", api, params=qs, headers=bearer(env)).status_code == 422
    data = call(env, "GET", api, params={**qs, "map_index": "-1"}, headers=bearer(env)).json()
    (attempt,) = data["tries"]
    assert data["map_index"] == -1 and attempt["try_number"] == 1
    assert attempt["writes"][0]["status"] == "refused"
    assert attempt["writes"][0]["fingerprint_parts"]["policy_version"] == "v1"
    assert attempt["events"][0]["failed"] is True
    empty = call(
        env,
        "GET",
        f"/idempotent/dags/{GUARDED}/attempt",
        params={**qs, "task_id": "other"},
        headers=bearer(env),
    )
    assert "No window write or attempt is recorded" in empty.text


def test_the_json_api_is_documented(env: dict[str, Any]) -> None:
    spec = call(env, "GET", "/idempotent/api/openapi.json", headers=bearer(env)).json()
    api_routes = {_template(p) for _, p, _, _ in ROUTES if "/api/" in p}
    assert {path for path in spec["paths"]} == api_routes
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            assert operation.get("summary"), path
    create = spec["paths"]["/api/dags/{dag_id}/backfills"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/BackfillForm"
    }
    form = spec["components"]["schemas"]["BackfillForm"]
    assert {"from_date", "to_date", "semantics", "reason", "policy_version", "thresholds"} <= set(
        form["properties"]
    )
    assert "ThresholdsForm" in spec["components"]["schemas"]
    # Not served anywhere without a user.
    assert call(env, "GET", "/idempotent/api/openapi.json").status_code == 401
    assert call(env, "GET", "/idempotent/docs", headers=bearer(env)).status_code == 404


def test_history_without_any_readable_dag_is_forbidden(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(security, "readable_dag_ids", lambda user: set())
    assert call(env, "GET", "/idempotent/history", headers=bearer(env)).status_code == 403
    assert call(env, "GET", "/idempotent/api/history", headers=bearer(env)).status_code == 403


def test_an_unreachable_history_store_is_reported_not_hidden(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = HistoryStore(
        engine=sa.create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none?connect_timeout=1")
    )
    monkeypatch.setattr(ui.app.state, "history_store", broken)
    page = call(env, "GET", f"/idempotent/dags/{GUARDED}/history", headers=bearer(env))
    assert page.status_code == 503 and "the history store cannot be read" in page.text
    api = call(env, "GET", f"/idempotent/api/dags/{GUARDED}/history", headers=bearer(env))
    assert api.status_code == 503
    p = preview(env)
    assert p["history_error"] and not p["can_submit"]
    create = call(env, "POST", f"/idempotent/api/dags/{GUARDED}/backfills", FORM, headers=bearer(env))
    assert create.status_code == 503 and "does not write blind" in create.json()["detail"]


def test_window_series_and_chart_numbers() -> None:
    writes = [
        {"status": "written", "dataset_version": 1, "row_count": 40, "diff": None},
        {"status": "refused", "dataset_version": 1, "row_count": None, "diff": json.loads(_diff("1", "2"))},
        {
            "status": "written",
            "dataset_version": 2,
            "row_count": 40,
            "diff": json.loads(_diff("100.50", "90.25")),
        },
    ]
    series = window_series({"writes": writes})
    assert series == {"amount_eur": {1: Decimal("100.50"), 2: Decimal("90.25")}, "rows": {1: 40, 2: 40}}
    # Data that predates the history is "before history" (version 0).
    first = [
        {"status": "written", "dataset_version": 1, "row_count": 40, "diff": json.loads(_diff("10", "12"))}
    ]
    assert window_series({"writes": first})["amount_eur"] == {0: Decimal("10"), 1: Decimal("12")}
    chart = build_chart("amount_eur", [("2026-08-03", series["amount_eur"])])
    assert chart["legend"] == [{"cls": "v1", "text": "version 1"}, {"cls": "v2", "text": "version 2"}]
    assert chart["rows"] == [{"label": "2026-08-03", "cells": ["100.50", "90.25"], "change": "-10.25"}]
    assert all(b["h"] > 0 for b in chart["bars"])
    negative = build_chart("m", [("a", {1: Decimal("-5")}), ("b", {1: Decimal("5")})])
    assert negative["plot"]["zero"] < negative["plot"]["bottom"]


def test_history_query_parsing() -> None:
    q = HistoryQuery.parse(
        {"dag_id": " a.b-c ", "from": "2026-08-01", "to": "2026-08-02", "flag": "skipped", "limit": "7"}
    )
    assert (q.dag_id, q.first, q.last, q.flag, q.limit) == (
        "a.b-c",
        date(2026, 8, 1),
        date(2026, 8, 2),
        "skipped",
        7,
    )
    flt = q.filter()
    assert flt.start == datetime(2026, 8, 1, tzinfo=UTC) and flt.end == datetime(2026, 8, 3, tzinfo=UTC)
    with pytest.raises(InputError) as err:
        HistoryQuery.parse({"from": "2026-08-02", "to": "2026-08-01", "limit": "0", "flag": "x"})
    assert {p[1] for p in err.value.problems} == {"to", "limit", "flag"}


FORM_FIELDS = {"semantics", "reason", "policy_version", "approve_windows", "thresholds"}


def _form_expressible(conf: Any) -> bool:
    """A conf the backfill form can send: a JSON object of the form's fields, with semantics."""
    if not isinstance(conf, dict) or not set(conf) <= FORM_FIELDS or "semantics" not in conf:
        return False
    try:
        json.dumps(conf, allow_nan=False)
    except ValueError:
        return False
    return True


FORM_CONFS = [(conf, expected) for conf, expected in INTENT_CONFS if _form_expressible(conf)]


@pytest.mark.parametrize(("conf", "expected"), FORM_CONFS, ids=[f"conf{i}" for i in range(len(FORM_CONFS))])
def test_the_ui_form_accepts_or_refuses_a_conf_as_the_guard_does(
    env: dict[str, Any], conf: dict[str, Any], expected: str | None
) -> None:
    """The backfill form's preview, for every conf of the guard's table the form can express: the
    form's own 422 only where the guard refuses too, else the guard's refusal (or none) verbatim."""
    assert len(FORM_CONFS) >= 15
    answer = call(
        env,
        "POST",
        f"/idempotent/api/dags/{GUARDED}/backfills/preview",
        {"from_date": "2026-08-10", "to_date": "2026-08-11", **conf},
        headers=bearer(env),
    )
    if answer.status_code == 422:
        assert expected is not None, answer.text  # the form refuses only what the guard refuses
        return
    assert answer.status_code == 200, answer.text
    refusal = answer.json()["refusal"]
    if expected is None:
        assert refusal is None
    else:
        assert refusal is not None and expected in refusal

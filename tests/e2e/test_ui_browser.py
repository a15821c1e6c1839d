"""End to end in a browser: the run history and guarded backfill pages inside Airflow's real UI.

A real API server (with this package's plugin: its FastAPI app, external views and guard
middleware), scheduler, DAG processor and LocalExecutor workers on fresh PostgreSQL databases,
started with tests/e2e/conftest.py's helpers but with real users instead of "everyone is admin":
Airflow's simple auth manager with passwords, plus per-DAG access (what a production auth manager
has; tests/authmanager.py): `outsider` may not access the DAG `idem_ui_payouts`; `viewer` may
only read.

Headless Chromium (Debian's /usr/bin/chromium, driven by Playwright) logs in on Airflow's login
page, opens Browse > Run history, then the DAG's "Guarded backfill" tab: a corrective backfill of
three windows without a policy version is refused in the preview with the guard's message; with
one, the preview lists the windows against the cap and their v1 data; it is started from the form
and watched until every window's diff has landed. The history's chart then shows each window's
total before and after. A second backfill (back to v1, with a 0.1 % limit) breaches on its first
window; the Stop button sets the kill switch and pauses it, and production keeps the v2 totals.
Last, the task instance's "Window write" tab shows that attempt's refused write and diff.
Screenshots go to docs/screenshots/ (used in the README).

Also against the real server: every route answers 401 without credentials, 403 with a forged
token, 403 for a user without access to the DAG (and for a viewer on every change), and hostile
values in query parameters and form fields are refused with nothing created.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals
from airflow_idempotent.guard.killswitch import active_switches
from airflow_idempotent.history.store import HistoryStore
from tests.authmanager import SCOPES_ENV
from tests.conftest import REPO_ROOT
from tests.e2e.conftest import (
    AirflowCluster,
    deployment,
    shot,
)
from tests.test_preview import payout, table_digest  # the scenario's formula, computed in the tests

pytestmark = pytest.mark.e2e

DAG_ID = "idem_ui_payouts"
CONN_ID = "idem_ui_warehouse"
PER_DAY = 40
DAYS = [date(2026, 8, 3), date(2026, 8, 4), date(2026, 8, 5)]
RANGE = {"from_date": "2026-08-03T00:00:00Z", "to_date": "2026-08-05T00:00:00Z"}
PASSWORDS = {"admin": "admin", "viewer": "viewer", "outsider": "outsider"}
REASON = "contract fix: v2 rates <b>not bold</b>"

DAG_SOURCE = f'''
"""Guarded payouts for the UI's end-to-end test: cap 5, amount_eur summed in every diff."""
import pendulum
from airflow.sdk import DAG, Param

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig
from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="{DAG_ID}",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2026, 8, 31, tz="UTC"),  # in the past: only backfills run
    catchup=False,
    max_active_runs=3,
    params={{
        "policy_version": Param("v1", type="string", enum=["v1", "v2"]),
        **GuardConfig(cap=5, measures=["amount_eur"]).param(),
    }},
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="{CONN_ID}",
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        parameters={{"policy_version": "{{{{ params.policy_version }}}}"}},
        granularity="day",
    )
'''

# --------------------------------------------------------------------------------------------
# The cluster (real users), the warehouse, the seed
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowCluster]:
    """conftest's deployment (PostgreSQL, LocalExecutor, three services), logins required."""
    dags = tmp_path_factory.mktemp("ui_dags")
    (dags / f"{DAG_ID}.py").write_text(DAG_SOURCE)
    with deployment(tmp_path_factory, "idem_ui", dags) as cluster:
        (cluster.home / "passwords.json").write_text(json.dumps(PASSWORDS))
        cluster.env.update(
            {
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer,outsider:op",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(cluster.home / "passwords.json"),
                # tests/authmanager.py (the repository on the servers' path): outsider may reach no DAG.
                "AIRFLOW__CORE__AUTH_MANAGER": "tests.authmanager.PerDagAuthManager",
                SCOPES_ENV: "outsider=",
                "PYTHONPATH": str(REPO_ROOT),
            }
        )
        cluster.migrate()
        cluster.start_services()
        yield cluster


@pytest.fixture(scope="module")
def warehouse(cluster: AirflowCluster) -> sa.Engine:
    """The SQLite warehouse the DAG writes, its connection, the DAG parsed and unpaused."""
    path = cluster.home / "ui_warehouse.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    create_sales(engine, days=31, per_day=PER_DAY)
    create_payouts(engine)
    cluster.request(
        "POST", "/api/v2/connections", {"connection_id": CONN_ID, "conn_type": "sqlite", "host": str(path)}
    )
    cluster.wait_for("the DAG to be parsed", lambda: cluster.request("GET", f"/api/v2/dags/{DAG_ID}"), 120)
    cluster.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    return engine


@pytest.fixture(scope="module")
def history(cluster: AirflowCluster) -> Iterator[HistoryStore]:
    store = HistoryStore(engine=sa.create_engine(cluster.history_url))
    yield store
    store.engine.dispose()


def wait_backfill(cluster: AirflowCluster, backfill_id: int, timeout: float = 150) -> None:
    cluster.wait_for(
        f"backfill {backfill_id} to complete",
        lambda: cluster.request("GET", f"/api/v2/backfills/{backfill_id}")["completed_at"],
        timeout=timeout,
        every=1,
    )


@pytest.fixture(scope="module")
def seeded(cluster: AirflowCluster, warehouse: sa.Engine) -> int:
    """Production as it was: the three windows computed under policy v1 (a guarded backfill)."""
    body = {
        "dag_id": DAG_ID,
        **RANGE,
        "max_active_runs": 3,
        "dag_run_conf": {"semantics": "corrective", "reason": "initial load", "policy_version": "v1"},
    }
    created = cluster.request("POST", "/api/v2/backfills", body)
    wait_backfill(cluster, created["id"])
    runs = cluster.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns?run_type=backfill")["dag_runs"]
    assert {r["state"] for r in runs} == {"success"}, runs
    return int(created["id"])


def token(cluster: AirflowCluster, user: str) -> str:
    status, answer = cluster.call(
        "POST", "/auth/token", {"username": user, "password": PASSWORDS[user]}, auth=False
    )
    assert status in (200, 201), answer
    return str(answer["access_token"])


def http(
    cluster: AirflowCluster, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """Status and text of a request with exactly these headers (urllib: no cookie jar)."""
    import urllib.error
    import urllib.request

    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    all_headers = {"Accept": "application/json", **({"Content-Type": "application/json"} if data else {})}
    all_headers.update(headers or {})
    req = urllib.request.Request(cluster.base_url + path, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def totals(engine: sa.Engine) -> dict[date, tuple[int, Decimal]]:
    return {day: window_totals(engine, "payouts", day) for day in DAYS}


def counts(cluster: AirflowCluster, history: HistoryStore) -> tuple[int, int, int]:
    """(backfills of the DAG, history writes, kill switch rows): what refused requests leave alone."""
    backfills = cluster.request("GET", f"/api/v2/backfills?dag_id={DAG_ID}")["total_entries"]
    with history.engine.connect() as conn:
        writes = conn.execute(sa.text("SELECT count(*) FROM idem_window_write")).scalar_one()
        switches = conn.execute(sa.text("SELECT count(*) FROM idem_kill_switch")).scalar_one()
    return int(backfills), int(writes), int(switches)


# --------------------------------------------------------------------------------------------
# Every route against the real server
# --------------------------------------------------------------------------------------------

FORM = {
    "from_date": "2026-08-10",
    "to_date": "2026-08-11",
    "semantics": "corrective",
    "reason": "r",
    "policy_version": "v2",
}


#: The rerun preview of the first window (a window row's own bounds).
RERUN = {"window_start": "2026-08-03T00:00:00+00:00", "window_end": "2026-08-04T00:00:00+00:00"}


def routes(backfill_id: int) -> list[tuple[str, str, Any, bool]]:
    """(method, path, body, names the DAG or lists the user's DAGs) for every route of the app."""
    qs = "run_id=backfill__2026-08-03T00%3A00%3A00%2B00%3A00&task_id=write_payouts&map_index=-1"
    dag = f"/idempotent/api/dags/{DAG_ID}"
    return [
        ("GET", "/idempotent/", None, True),  # redirects to the history of the user's DAGs
        ("GET", "/idempotent/history", None, True),
        ("GET", f"/idempotent/history?dag_id={DAG_ID}", None, True),
        ("GET", f"/idempotent/dags/{DAG_ID}/history", None, True),
        ("GET", f"/idempotent/dags/{DAG_ID}/backfill", None, True),
        ("GET", f"/idempotent/dags/{DAG_ID}/attempt?{qs}", None, True),
        ("GET", f"/idempotent/dags/{DAG_ID}/rerun?{urllib.parse.urlencode(RERUN)}", None, True),
        ("GET", "/idempotent/static/idempotent.css", None, False),
        ("GET", "/idempotent/static/backfill.js", None, False),
        ("GET", "/idempotent/static/rerun.js", None, False),
        ("GET", "/idempotent/api/history", None, True),
        ("GET", f"/idempotent/api/history?dag_id={DAG_ID}", None, True),
        ("GET", f"{dag}/history", None, True),
        ("GET", f"{dag}/guard", None, True),
        ("POST", f"{dag}/backfills/preview", FORM, True),
        ("POST", f"{dag}/backfills", FORM, True),
        ("GET", f"{dag}/backfills/{backfill_id}", None, True),
        ("POST", f"{dag}/backfills/{backfill_id}/stop", {"reason": "x"}, True),
        ("POST", f"{dag}/killswitch/clear", {}, True),
        ("GET", f"{dag}/attempts?{qs}", None, True),
        ("POST", f"{dag}/rerun/preview", RERUN, True),
        ("GET", "/idempotent/api/openapi.json", None, False),
    ]


def test_every_route_needs_a_user_with_access_to_the_dag(
    cluster: AirflowCluster, history: HistoryStore, seeded: int
) -> None:
    import jwt

    from airflow_idempotent.plugins import ui

    # path_format: a route's parameters without their converters ({backfill_id:int} as {backfill_id})
    declared = {r.path_format for r in ui.app.routes if hasattr(r, "methods")}
    tested = {re.sub(r"\?.*", "", p).removeprefix("/idempotent") for _, p, _, _ in routes(seeded)}
    tested = {
        p.replace(DAG_ID, "{dag_id}").replace(f"/backfills/{seeded}", "/backfills/{backfill_id}")
        for p in tested
    }
    assert {re.sub(r"/static/.*", "/static/{name}", p) for p in tested} == declared
    forged = jwt.encode({"sub": "admin", "role": "admin", "exp": 4102444800}, "x" * 64, algorithm="HS512")
    outsider = {"Authorization": f"Bearer {token(cluster, 'outsider')}"}
    viewer = {"Authorization": f"Bearer {token(cluster, 'viewer')}"}
    before = counts(cluster, history)
    for method, path, body, names_dag in routes(seeded):
        status, text = http(cluster, method, path, body)
        assert status == 401, (method, path, status, text[:200])
        status, text = http(cluster, method, path, body, {"Authorization": f"Bearer {forged}"})
        assert status == 403, (method, path, status, text[:200])
        status, text = http(cluster, method, path, body, {"Cookie": f"_token={forged}"})
        assert status == 403, (method, path, status, text[:200])
        # The outsider may read no DAG here: every DAG route, and the history of "all my DAGs", is 403.
        status, text = http(cluster, method, path, body, outsider)
        if names_dag:
            assert status == 403 and DAG_ID not in text, (method, path, status, text[:200])
        else:
            assert status == 200 and DAG_ID not in text, (method, path, status, text[:200])
        if method == "POST":
            status, text = http(cluster, method, path, body, viewer)
            assert status == 403, (method, path, status, text[:200])
    assert counts(cluster, history) == before


def test_every_credential_form_on_the_rerun_preview(
    cluster: AirflowCluster, warehouse: sa.Engine, seeded: int
) -> None:
    """The rerun preview stages the DAG's SQL against the warehouse, so it is guarded as a write.
    On the real API server with real users: every bearer form Airflow accepts gets the preview;
    the UI's cookie alone is a browser session, refused without the page's CSRF token or with a
    forged one and answered with the page's; a form Airflow refuses is 401; the table is unchanged."""
    admin = token(cluster, "admin")
    path = f"/idempotent/api/dags/{DAG_ID}/rerun/preview"
    before = totals(warehouse)
    bearer_forms = {
        "Bearer": {"Authorization": f"Bearer {admin}"},
        "Bearer + two spaces": {"Authorization": f"Bearer  {admin}"},
        "Bearer + space + tab": {"Authorization": f"Bearer \t{admin}"},
        "lower-case scheme": {"Authorization": f"bearer {admin}"},
    }
    for form, headers in bearer_forms.items():
        status, text = http(cluster, "POST", path, RERUN, headers)
        assert status == 200, (form, status, text[:300])
        tasks = {t["task_id"]: t for t in json.loads(text)["tasks"]}
        assert tasks["write_payouts"]["preview"]["diff"]["unchanged"] == PER_DAY, (form, tasks)
    cookie = {"Cookie": f"_token={admin}"}
    status, text = http(cluster, "POST", path, RERUN, cookie)
    assert status == 403 and "X-Idempotent-CSRF" in text, (status, text[:300])
    assert http(cluster, "POST", path, RERUN, {**cookie, "X-Idempotent-CSRF": "forged"})[0] == 403
    status, page = http(
        cluster, "GET", f"/idempotent/dags/{DAG_ID}/rerun?{urllib.parse.urlencode(RERUN)}", None, cookie
    )
    found = re.search(r'<meta name="idempotent-csrf" content="([^"]+)">', page)
    assert status == 200 and found is not None, (status, page[:300])
    status, text = http(cluster, "POST", path, RERUN, {**cookie, "X-Idempotent-CSRF": found.group(1)})
    assert status == 200, (status, text[:300])
    assert http(cluster, "POST", path, RERUN, {"Authorization": f"Bearer\t{admin}"})[0] == 401
    assert totals(warehouse) == before


def test_hostile_values_are_refused_and_nothing_is_written(
    cluster: AirflowCluster, history: HistoryStore, seeded: int
) -> None:
    admin = {"Authorization": f"Bearer {cluster.token()}"}
    hostile = [
        "<script>alert(1)</script>",
        "' OR 1=1 --",
        "x; DROP TABLE idem_window_write",
        "\x00",
        "9" * 700,
    ]
    before = counts(cluster, history)
    for name in ("dag_id", "task_id", "table", "from", "to", "flag", "limit"):
        for value in hostile:
            query = urllib.parse.urlencode({name: value})
            for path in ("/idempotent/history", "/idempotent/api/history"):
                status, text = http(cluster, "GET", f"{path}?{query}", headers=admin)
                assert status == 422, (name, value, status)
                assert "<script>alert" not in text
    for name in ("run_id", "task_id", "map_index"):
        for value in hostile:
            query = urllib.parse.urlencode({"run_id": "r", "task_id": "t", name: value})
            status, text = http(cluster, "GET", f"/idempotent/dags/{DAG_ID}/attempt?{query}", headers=admin)
            assert status == 422 and "<script>alert" not in text, (name, value, status)
    fields: dict[str, list[Any]] = {
        "from_date": ["<script>", 20260810],
        "to_date": ["' OR 1=1 --"],
        "semantics": ["delete"],
        "reason": ["", "a\x00b", "x" * 501],
        "policy_version": ["v2; DROP TABLE payouts", "<img src=x>"],
        "approve_windows": [0, "4"],
        "max_active_runs": [0, "2"],
        "reprocess_behavior": ["all"],
        "thresholds": ["strict", {"max_changed_rows": -1}, {"max_measure_rel_change": {"a; DROP": 1}}],
        "unknown": ["x"],
    }
    for name, values in fields.items():
        for value in values:
            for route in ("backfills/preview", "backfills"):
                status, text = http(
                    cluster, "POST", f"/idempotent/api/dags/{DAG_ID}/{route}", {**FORM, name: value}, admin
                )
                assert status == 422, (name, value, route, status, text[:300])
    status, _ = http(
        cluster, "POST", f"/idempotent/api/dags/{DAG_ID}/backfills/{seeded}/stop", {"reason": "\x07"}, admin
    )
    assert status == 422
    status, _ = http(cluster, "GET", "/idempotent/dags/%3Cscript%3E/backfill", headers=admin)
    assert status == 422
    assert counts(cluster, history) == before


# --------------------------------------------------------------------------------------------
# The browser
# --------------------------------------------------------------------------------------------


def to_top(locator: Any) -> None:
    """Scroll the page inside the iframe so that this element is at the top of the view."""
    locator.evaluate("element => element.scrollIntoView({block: 'start'})")


def test_a_guarded_backfill_from_the_airflow_ui(
    cluster: AirflowCluster, warehouse: sa.Engine, history: HistoryStore, seeded: int, browser: Any
) -> None:
    from playwright.sync_api import expect

    started = time.monotonic()
    v1 = totals(warehouse)
    assert all(count == PER_DAY for count, _ in v1.values()), v1
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))

    # Log in on Airflow's own login page.
    page.goto(cluster.base_url + "/")
    page.locator("input[name=username]").fill("admin")
    page.locator("input[name=password]").fill(PASSWORDS["admin"])
    page.locator("button[type=submit]").click()
    page.wait_for_url(cluster.base_url + "/")

    # Browse > Run history: the nav entry opens the page inside Airflow's UI.
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Run history").click()
    nav = page.frame_locator("iframe[title='Run history']")
    expect(nav.locator("p.count")).to_have_text("3 windows.")
    expect(nav.locator("section.window").first).to_contain_text("payouts")

    # The DAG's "Guarded backfill" tab. First without a policy version: the guard refuses.
    page.goto(f"{cluster.base_url}/dags/{DAG_ID}")
    page.get_by_role("link", name="Guarded backfill").click()
    form = page.frame_locator("iframe[title='Guarded backfill']")
    expect(form.locator("html[data-ready='1']")).to_have_count(1, timeout=30_000)  # its script is wired up
    form.locator("#from_date").fill("2026-08-03")
    form.locator("#to_date").fill("2026-08-05")
    form.locator("#reprocess_behavior").select_option("completed")
    form.locator("#max_active_runs").fill("3")
    form.locator("#semantics").select_option("corrective")
    form.locator("#reason").fill(REASON)
    form.locator("#preview-button").click()
    expect(form.locator("#preview-refusal")).to_contain_text(
        "The guard refuses: a corrective backfill recomputes history under a declared new rule: "
        'add "policy_version"'
    )
    expect(form.locator("#start-button")).to_be_disabled()
    to_top(form.locator("#preview"))
    shot(page, "backfill-refused")

    # With the policy version: three windows against the cap of 5, each holding v1 data.
    form.locator("#policy_version").fill("v2")
    form.locator("#preview-button").click()
    expect(form.locator("#preview-summary")).to_contain_text("3 windows will run, of 3 in the range · cap 5")
    expect(form.locator("#preview-refusal")).to_be_hidden()
    rows = form.locator("#preview-table tbody tr")
    expect(rows).to_have_count(3)
    for i, day in enumerate(DAYS):
        expect(rows.nth(i)).to_contain_text(day.isoformat())
        expect(rows.nth(i)).to_contain_text("payouts: policy v1, version 1, 40 rows")
    to_top(form.locator("#preview"))
    shot(page, "backfill-preview")

    # Start it, and watch every window's diff land.
    before = counts(cluster, history)[0]
    form.locator("#start-button").click()
    expect(form.locator("#message")).to_contain_text("created: its windows are queued")
    backfill_id = int(re.search(r"Backfill (\d+) created", form.locator("#message").inner_text()).group(1))  # type: ignore[union-attr]
    assert counts(cluster, history)[0] == before + 1
    expect(form.locator("#status-id")).to_have_text(f"#{backfill_id}")
    expect(form.locator("#status-phase")).to_have_text("completed", timeout=180_000)
    v2 = totals(warehouse)
    status_rows = form.locator("#status-table tbody tr")
    expect(status_rows).to_have_count(3)
    for i, day in enumerate(DAYS):
        row = status_rows.nth(i)
        expect(row).to_contain_text(day.isoformat())
        expect(row).to_contain_text("written")
        expect(row).to_contain_text("policy v2 · version 2")
        before_total, after_total = v1[day][1], v2[day][1]
        expect(row).to_contain_text(
            f"amount_eur {before_total:,.2f} → {after_total:,.2f} ({after_total - before_total:,.2f})"
        )
    # The reason's markup is text on the page, never HTML.
    expect(form.locator("#status-summary")).to_contain_text(REASON)
    assert form.locator("#status-summary b").count() == 0
    to_top(form.locator("#status"))
    shot(page, "backfill-diffs")
    assert all(v2[d][1] < v1[d][1] for d in DAYS)  # v2 pays 0.55 instead of 0.60 at or above 400

    # The run history: each window's total per dataset version, before and after.
    page.get_by_role("link", name="Run history").first.click()
    dag_history = page.frame_locator("iframe[title='Run history']")
    chart = dag_history.locator("figure.chart[data-measure=amount_eur]")
    expect(chart.locator("rect.bar.v1")).to_have_count(3)
    expect(chart.locator("rect.bar.v2")).to_have_count(3)
    table = chart.locator("table.numbers tbody tr")
    for i, day in enumerate(DAYS):
        expect(table.nth(i)).to_contain_text(f"{v1[day][1]:,.2f}")
        expect(table.nth(i)).to_contain_text(f"{v2[day][1]:,.2f}")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Run history").click()
    nav = page.frame_locator("iframe[title='Run history']")
    expect(nav.locator("figure.chart[data-measure=amount_eur] rect.bar")).to_have_count(6)
    shot(page, "history")

    # Back to v1 with a 0.1 % limit on amount_eur: the first window breaches. Stop.
    page.goto(f"{cluster.base_url}/dags/{DAG_ID}/plugin/idempotent-backfill")
    form = page.frame_locator("iframe[title='Guarded backfill']")
    expect(form.locator("html[data-ready='1']")).to_have_count(1, timeout=30_000)  # its script is wired up
    form.locator("#from_date").fill("2026-08-03")
    form.locator("#to_date").fill("2026-08-05")
    form.locator("#reprocess_behavior").select_option("completed")
    form.locator("#max_active_runs").fill("1")
    form.locator("#reason").fill("revert to v1 rates")
    form.locator("#policy_version").fill("v1")
    form.locator("input[name=rel_amount_eur]").fill("0.001")
    form.locator("#preview-button").click()
    expect(form.locator("#preview-summary")).to_contain_text("amount_eur ±0.1 %")
    form.locator("#start-button").click()
    expect(form.locator("#message")).to_contain_text("created")
    breach_id = int(re.search(r"Backfill (\d+) created", form.locator("#message").inner_text()).group(1))  # type: ignore[union-attr]
    first = form.locator("#status-table tbody tr").first
    expect(first).to_contain_text("refused", timeout=120_000)
    expect(first).to_contain_text("stop condition: 2026-08-03: amount_eur sum changed by")
    expect(first).to_contain_text("> max_measure_rel_change 0.001")
    form.locator("#stop-reason").fill("breach on 2026-08-03: investigating")
    form.locator("#stop-button").click()
    expect(form.locator("#status-phase")).to_have_text("stopped")
    expect(form.locator("#message")).to_contain_text(
        "Stopped: the kill switch is on and the backfill is paused"
    )
    expect(form.locator("#switch-list")).to_contain_text("breach on 2026-08-03: investigating")
    to_top(form.locator("#message"))
    shot(page, "backfill-stopped")

    breach = cluster.request("GET", f"/api/v2/backfills/{breach_id}")
    assert breach["is_paused"] is True
    switches = active_switches(history, DAG_ID, backfill=True)
    assert [(s.reason, s.set_by) for s in switches] == [("breach on 2026-08-03: investigating", "admin (UI)")]
    assert totals(warehouse) == v2  # nothing of the refused backfill reached production
    since = datetime.fromisoformat(breach["created_at"].replace("Z", "+00:00"))
    breach_writes = [w for w in history.writes(dag_id=DAG_ID) if w["written_at"] >= since]
    assert breach_writes and all(w["status"] == "refused" for w in breach_writes), breach_writes

    # The refused attempt, from its task instance: "Window write" tab.
    run_id = "backfill__2026-08-03T00:00:00+00:00"
    page.goto(
        f"{cluster.base_url}/dags/{DAG_ID}/runs/{urllib.parse.quote(run_id, safe='')}/tasks/write_payouts"
    )
    page.get_by_role("link", name="Window write").click()
    attempt = page.frame_locator("iframe[title='Window write']")
    latest = attempt.locator("section.try").first
    expect(latest.locator("h3")).to_contain_text("refused")
    expect(latest).to_contain_text("> max_measure_rel_change 0.001")
    expect(latest.locator("dl.facts")).to_contain_text("v1")
    expect(latest.locator("table.diff-table").last).to_contain_text("amount_eur")
    expect(latest.locator("pre.parts")).to_contain_text('"policy_version": "v1"')
    shot(page, "attempt")
    assert errors == [], errors

    # Leave the DAG as found: cancel the stopped backfill, clear its switch (through the API).
    cluster.request("PUT", f"/api/v2/backfills/{breach_id}/cancel")
    assert cluster.request("POST", f"/idempotent/api/dags/{DAG_ID}/killswitch/clear", {}) == {"cleared": True}
    elapsed = time.monotonic() - started
    assert elapsed < 240, f"the browser scenario took {elapsed:.0f} s"


# --------------------------------------------------------------------------------------------
# "Preview rerun" on a window of the run history (issue 15)
# --------------------------------------------------------------------------------------------


def login(page: Any, cluster: AirflowCluster) -> None:
    """Airflow's own login page, unless the browser's session is still logged in."""
    page.goto(cluster.base_url + "/")
    username = page.locator("input[name=username]")
    if username.count():
        username.fill("admin")
        page.locator("input[name=password]").fill(PASSWORDS["admin"])
        page.locator("button[type=submit]").click()
        page.wait_for_url(cluster.base_url + "/")


def test_preview_rerun_of_a_window_from_the_run_history(
    cluster: AirflowCluster, warehouse: sa.Engine, history: HistoryStore, seeded: int, browser: Any
) -> None:
    """After a policy change, "Preview rerun" on the 2026-08-03 window reports exactly the rows the
    other policy changes (computed here from the scenario's formula), and leaves the table as it was."""
    from playwright.sync_api import expect

    started = time.monotonic()
    day = DAYS[0]
    sales = range(
        (day - date(2026, 8, 1)).days * PER_DAY + 1, (day - date(2026, 8, 1)).days * PER_DAY + PER_DAY + 1
    )
    held = window_totals(warehouse, "payouts", day)[1]
    # Production holds v1 (the seed) or v2 (after the guarded backfill above): preview the other one.
    current = "v2" if held == sum(payout(i, "v2") for i in sales) else "v1"
    assert held == sum(payout(i, current) for i in sales), held
    other = "v1" if current == "v2" else "v2"
    expected = sum(1 for i in sales if payout(i, current) != payout(i, other))
    assert expected > 0
    digest = table_digest(warehouse)
    writes_before = counts(cluster, history)[1]

    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    login(page, cluster)
    page.goto(f"{cluster.base_url}/dags/{DAG_ID}")
    page.get_by_role("link", name="Run history").first.click()
    frame = page.frame_locator("iframe[title='Run history']")
    window = frame.locator("section.window").filter(has_text=day.isoformat()).first
    window.get_by_role("link", name="Preview rerun").click()
    expect(frame.locator("html[data-ready='1']")).to_have_count(1, timeout=30_000)  # its script is wired up
    expect(frame.locator("#window")).to_have_text(
        f"[{day.isoformat()}T00:00:00+00:00, 2026-08-04T00:00:00+00:00)"
    )
    frame.locator("#policy_version").fill(other)
    frame.locator("#preview-button").click()
    task = frame.locator("section.task[data-task=write_payouts]")
    expect(task.locator("h3 .verdict")).to_have_text("safe", timeout=60_000)
    cells = task.locator("table.counts tr").nth(1).locator("td")
    expect(cells).to_have_count(4)
    assert [cells.nth(k).inner_text() for k in range(4)] == ["0", "0", str(expected), str(PER_DAY - expected)]
    before, after = sum(payout(i, current) for i in sales), sum(payout(i, other) for i in sales)
    sums = task.locator("table.measures tr").nth(1).locator("td")
    expect(sums).to_have_count(4)
    shown = [sums.nth(k).inner_text() for k in range(4)]
    assert shown[0] == "amount_eur", shown
    assert [Decimal(v.replace(",", "")) for v in shown[1:]] == [before, after, after - before], shown
    expect(frame.locator("#result-summary")).to_contain_text("nothing was written")
    to_top(frame.locator("#result"))
    shot(page, "rerun-preview")
    assert table_digest(warehouse) == digest  # the target is byte-identical
    assert counts(cluster, history)[1] == writes_before  # no history record either
    assert errors == [], errors
    elapsed = time.monotonic() - started
    assert elapsed < 90, f"the rerun preview scenario took {elapsed:.0f} s"

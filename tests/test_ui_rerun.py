"""The UI's "Preview rerun" (issue 15) through real parts: Airflow's own API app with the plugin and
the per-DAG auth manager (tests/ui_env.py's `airflow_api_app`), a real PostgreSQL warehouse.

The DAG writes the scenario's payouts (docs/contributing.md, The payouts scenario); production holds the
window under policy v1, put there by plain SQL from the scenario's formula (not by the package).
Expected figures are computed here from the same formula:

    price_eur = round(25 + ((i * 37) % 900) * 0.5, 2)        sale i, 2,000 a day from 2026-08-01
    v1: amount = round(price * 0.60, 2); v2: price >= 400.00 pays 0.55

What was staged is witnessed by the warehouse itself: an event trigger bumps a sequence on every
CREATE TABLE (temporary ones too), and a sequence is not rolled back with the preview's
transaction. A refused request (another DAG's user, a viewer, no CSRF token, a bad conf) leaves
it where it was, and the target byte-identical.
"""

from __future__ import annotations

import json
import re
import secrets
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts, create_sales
from airflow_idempotent.guard import killswitch
from airflow_idempotent.history.store import HistoryStore
from tests.authmanager import SCOPES_ENV
from tests.conftest import PG_HOST, PG_PORT, PG_USER
from tests.test_preview import payout, table_digest
from tests.ui_env import airflow_api_app, august_write

DAG_ID = "rerun_ui_payouts"
OTHER = "rerun_ui_other"
CONN_ID = "rerun_ui_wh"
DAY = date(2026, 8, 25)
START = datetime(2026, 8, 25, tzinfo=UTC)
WINDOW = {"window_start": START.isoformat(), "window_end": (START + timedelta(days=1)).isoformat()}
SALES = range((DAY - date(2026, 8, 1)).days * 2000 + 1, (DAY - date(2026, 8, 1)).days * 2000 + 2001)
USERS = {"admin": "admin", "viewer": "viewer", "alice": "op"}
PATH = f"/idempotent/api/dags/{DAG_ID}/rerun/preview"

DAG_FILE = textwrap.dedent(
    f"""
    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, Param

    from airflow_idempotent.examples.payouts import PAYOUT_SQL
    from airflow_idempotent.operators import PartitionOverwriteOperator

    with DAG(
        {DAG_ID!r},
        schedule="@daily",
        start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
        catchup=False,
        params={{"policy_version": Param("v1", type="string", enum=["v1", "v2"])}},
    ):
        PartitionOverwriteOperator(
            task_id="write_payouts",
            conn_id={CONN_ID!r},
            table="payouts",
            partition_column="sale_date",
            key_columns=["sale_id"],
            sql=PAYOUT_SQL,
            parameters={{"policy_version": "{{{{ params.policy_version }}}}"}},
            granularity="day",
        )

    with DAG({OTHER!r}, schedule=None, start_date=pendulum.datetime(2026, 8, 1, tz="UTC")):
        EmptyOperator(task_id="noop")
    """
)


CHANGED_BY_V2 = sorted(i for i in SALES if payout(i, "v1") != payout(i, "v2"))


@dataclass
class Env:
    app: Any
    client: Any
    tokens: dict[str, str]
    engine: sa.Engine
    store: HistoryStore

    def post(self, body: Any, user: str = "admin", **headers: str) -> Any:
        return self.client.post(
            PATH, json=body, headers={"Authorization": f"Bearer {self.tokens[user]}", **headers}
        )

    def staged(self) -> int:
        """How many tables the warehouse has created so far (the event trigger's witness)."""
        with self.engine.connect() as conn:
            last, called = conn.execute(sa.text("SELECT last_value, is_called FROM ddl_witness")).one()
        return int(last) if called else 0

    def digest(self) -> str:
        """Every payouts row in key order, hashed in Python (independent of the package's checksum)."""
        return table_digest(self.engine)


@pytest.fixture(scope="module")
def env(airflow_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    from fastapi.testclient import TestClient

    db = f"idem_rerun_ui_{secrets.token_hex(5)}"
    admin = sa.create_engine(
        f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres", isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
    engine = sa.create_engine(f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{db}")
    store = HistoryStore(
        engine=sa.create_engine(f"sqlite:///{tmp_path_factory.mktemp('rerun_history')}/h.db")
    )
    store.migrate()
    try:
        create_sales(engine)
        create_payouts(engine)
        with engine.begin() as conn:  # production: the window under v1, from the scenario's formula
            conn.execute(
                sa.text(
                    "INSERT INTO payouts (sale_id, sale_date, amount_eur, rate) "
                    "SELECT sale_id, sale_date, ROUND(price_eur * 0.60, 2), 0.60 "
                    "FROM sales WHERE sale_date = :d"
                ),
                {"d": DAY},
            )
            conn.execute(sa.text("CREATE SEQUENCE ddl_witness"))
            conn.execute(
                sa.text(
                    "CREATE FUNCTION ddl_witness() RETURNS event_trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN PERFORM nextval('ddl_witness'); END $$"
                )
            )
            conn.execute(
                sa.text(
                    "CREATE EVENT TRIGGER ddl_witness ON ddl_command_end "
                    "WHEN TAG IN ('CREATE TABLE', 'CREATE TABLE AS') EXECUTE FUNCTION ddl_witness()"
                )
            )
        store.record(
            august_write(
                DAG_ID,
                DAY.day,
                f"scheduled__{DAY}T00:00:00+00:00",
                f"{CONN_ID}:payouts",
                fingerprint="f" * 64,
                written_at=START + timedelta(hours=1),
            )
        )
        connection = {
            "conn_type": "postgres",
            "host": PG_HOST,
            "port": PG_PORT,
            "login": PG_USER,
            "schema": db,
        }
        environment = {
            f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(connection),
            SCOPES_ENV: f"alice={OTHER}",
        }
        manager = "tests.authmanager.PerDagAuthManager"
        with airflow_api_app(tmp_path_factory, DAG_FILE, manager, USERS, store, environment) as (
            app,
            tokens,
            dags,
        ):
            assert {DAG_ID, OTHER} <= dags
            yield Env(app, TestClient(app, raise_server_exceptions=False), tokens, engine, store)
    finally:
        engine.dispose()
        store.engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()


def write_task(answer: dict[str, Any]) -> dict[str, Any]:
    return {t["task_id"]: t for t in answer["tasks"]}["write_payouts"]


def preview_events() -> list[tuple[str, str]]:
    """Airflow's audit log (the Event Log) entries of rerun previews, oldest first."""
    from airflow.models import Log
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.execute(
            sa.select(Log.owner, Log.dag_id).where(Log.event == "idempotent_preview_rerun").order_by(Log.id)
        ).all()
    return [(str(owner), str(dag_id)) for owner, dag_id in rows]


def test_the_preview_after_a_policy_change_reports_exactly_the_rows_v2_changes(env: Env) -> None:
    digest, staged, logged = env.digest(), env.staged(), preview_events()
    answer = env.post({**WINDOW, "conf": {"policy_version": "v2"}})
    assert answer.status_code == 200, answer.text
    task = write_task(answer.json())
    diff = task["preview"]["diff"]
    assert task["verdict"] == "safe" and task["policy_version"] == "v2"
    assert diff["changed"] == len(CHANGED_BY_V2) > 0
    assert (diff["added"], diff["removed"], diff["unchanged"]) == (0, 0, 2000 - len(CHANGED_BY_V2))
    amount = diff["measures"]["amount_eur"]
    assert Decimal(amount["before"]) == sum(payout(i, "v1") for i in SALES)
    assert Decimal(amount["after"]) == sum(payout(i, "v2") for i in SALES)
    assert task["preview"]["samples"]["changed"] == CHANGED_BY_V2[:10]
    assert env.staged() == staged + 1  # one staging table, for the one window-write task
    assert env.digest() == digest  # the target is byte-identical
    with env.engine.connect() as conn:
        assert not [n for n in sa.inspect(conn).get_table_names() if n.startswith("_idem_stg")]

    unchanged = write_task(env.post({**WINDOW, "conf": {}}).json())  # the DAG's own v1: nothing changes
    assert unchanged["preview"]["diff"]["changed"] == 0 and unchanged["preview"]["unchanged"] is True
    assert env.digest() == digest
    # Airflow's Event Log names who previewed which DAG, once per request.
    assert preview_events()[len(logged) :] == [("admin", DAG_ID)] * 2


@pytest.mark.parametrize("user", ["alice", "viewer"])
def test_a_user_of_other_dags_or_a_viewer_is_refused_and_nothing_is_staged(env: Env, user: str) -> None:
    digest, staged = env.digest(), env.staged()
    answer = env.post({**WINDOW, "conf": {"policy_version": "v2"}}, user=user)
    assert answer.status_code == 403, answer.text
    assert "write_payouts" not in answer.text and "amount_eur" not in answer.text
    assert env.staged() == staged and env.digest() == digest
    if user == "alice":  # her own DAG she may preview (it has no window-write task: nothing staged)
        other = env.client.post(
            f"/idempotent/api/dags/{OTHER}/rerun/preview",
            json=WINDOW,
            headers={"Authorization": f"Bearer {env.tokens['alice']}"},
        )
        assert other.status_code == 200, other.text
        assert [t["task_id"] for t in other.json()["tasks"]] == ["noop"]


def test_a_browser_session_without_the_pages_csrf_token_is_refused(env: Env) -> None:
    from fastapi.testclient import TestClient

    staged = env.staged()
    browser = TestClient(env.app, cookies={"_token": env.tokens["admin"]}, raise_server_exceptions=False)
    refused = browser.post(PATH, json=WINDOW)
    assert refused.status_code == 403 and "X-Idempotent-CSRF" in refused.json()["detail"]
    forged = browser.post(PATH, json=WINDOW, headers={"X-Idempotent-CSRF": "forged"})
    assert forged.status_code == 403
    assert env.staged() == staged
    page = browser.get(f"/idempotent/dags/{DAG_ID}/rerun", params=WINDOW)
    assert page.status_code == 200, page.text
    token = re.search(r'<meta name="idempotent-csrf" content="([^"]+)">', page.text)
    assert token is not None
    accepted = browser.post(PATH, json=WINDOW, headers={"X-Idempotent-CSRF": token.group(1)})
    assert accepted.status_code == 200, accepted.text
    assert env.staged() == staged + 1


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({**WINDOW, "conf": {"policy_version": "v3"}}, 422, "the DAG's params refuse the conf"),
        ({**WINDOW, "conf": {"policy_version": "v2'; DROP TABLE payouts; --"}}, 422, "params refuse"),
        (
            {**WINDOW, "conf": {"semantics": "corrective", "policy_version": "v2"}},
            422,
            "conf reason is missing",
        ),
        ({**WINDOW, "conf": {"semantics": "delete"}}, 422, "is not one of replay, corrective, reconcile"),
        ({**WINDOW, "conf": "v2"}, 422, "dict"),
        ({**WINDOW, "task_ids": ["nope"]}, 422, "has no task nope"),
        ({**WINDOW, "task_ids": ["<script>"]}, 422, "not a task id"),
        ({"window_start": WINDOW["window_end"], "window_end": WINDOW["window_start"]}, 422, "must be after"),
        ({**WINDOW, "window": "x"}, 422, "Extra inputs"),
        # wider than the guard's cap times its granularity (unguarded: the default, 31 days)
        (
            {"window_start": "1900-01-01T00:00:00+00:00", "window_end": "2999-01-01T00:00:00+00:00"},
            422,
            "is wider than 31 periods of day",
        ),
        (
            {"window_start": START.isoformat(), "window_end": (START + timedelta(days=33)).isoformat()},
            422,
            "is wider than 31 periods of day",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_fix_and_nothing_is_staged(
    env: Env, body: dict[str, Any], status: int, message: str
) -> None:
    digest, staged = env.digest(), env.staged()
    answer = env.post(body)
    assert answer.status_code == status, answer.text
    assert message in answer.text, answer.text
    assert env.staged() == staged and env.digest() == digest


def test_the_dag_file_is_parsed_off_the_request_thread_with_a_timeout(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Airflow's DagBag arms a SIGALRM timeout only the main thread may arm: parsed in a request
    thread it logged `signal only works in main thread` for every preview. Parsed in a thread of
    its own, waited for with core.dagbag_import_timeout, it logs nothing of the kind."""
    import logging

    with caplog.at_level(logging.WARNING):
        answer = env.post(WINDOW)
    assert answer.status_code == 200, answer.text
    assert not [
        r for r in caplog.records if "main thread" in r.getMessage() or "timeout can" in r.getMessage()
    ]
    assert "signal only works in main thread" not in caplog.text


def test_an_unknown_dag_is_404(env: Env) -> None:
    answer = env.client.post(
        "/idempotent/api/dags/no_such_dag/rerun/preview",
        json=WINDOW,
        headers={"Authorization": f"Bearer {env.tokens['admin']}"},
    )
    assert answer.status_code == 404 and "no_such_dag" in answer.json()["detail"]


def test_a_backfill_kill_switch_stops_a_backfill_rerun_and_is_noted_for_a_plain_one(env: Env) -> None:
    killswitch.set_switch(env.store, "backfill", DAG_ID, "breach on 2026-08-24")
    try:
        plain = env.post({**WINDOW, "conf": {"policy_version": "v2"}}).json()
        task = write_task(plain)
        assert plain["backfill"] is False and task["verdict"] == "safe"
        assert any(
            "a backfill of this window would refuse" in r and "breach on 2026-08-24" in r
            for r in task["reasons"]
        )
        conf = {"semantics": "corrective", "reason": "contract fix", "policy_version": "v2"}
        backfill = env.post({**WINDOW, "conf": conf}).json()
        task = write_task(backfill)
        assert backfill["backfill"] is True and task["verdict"] == "not safe"
        assert any(r.startswith("kill switch on: kill switch on backfill") for r in task["reasons"]), task[
            "reasons"
        ]
        assert backfill["kill_switches"] and "breach on 2026-08-24" in backfill["kill_switches"][0]
    finally:
        killswitch.clear_switch(env.store, "backfill", DAG_ID)


def test_the_history_offers_preview_rerun_on_the_window_and_the_page_shows_the_form(env: Env) -> None:
    from urllib.parse import parse_qs, urlparse

    auth = {"Authorization": f"Bearer {env.tokens['admin']}"}
    history = env.client.get(f"/idempotent/dags/{DAG_ID}/history", headers=auth)
    assert history.status_code == 200
    links = re.findall(r'<a class="preview-rerun" href="([^"]+)"', history.text)
    assert len(links) == 1, links
    link = urlparse(links[0].replace("&amp;", "&"))
    assert link.path.endswith(f"/dags/{DAG_ID}/rerun")
    query = {k: v[0] for k, v in parse_qs(link.query).items()}
    assert datetime.fromisoformat(query["window_start"]) == START  # the window row's own window
    assert datetime.fromisoformat(query["window_end"]) == START + timedelta(days=1)
    page = env.client.get(f"/idempotent/dags/{DAG_ID}/rerun", params=query, headers=auth)
    assert page.status_code == 200 and 'id="preview-button"' in page.text and "rerun.js" in page.text
    assert "policy_version=v1" in page.text
    bad = env.client.get(f"/idempotent/dags/{DAG_ID}/rerun", params={"window_start": "x"}, headers=auth)
    assert bad.status_code == 422
    assert env.client.get(f"/idempotent/dags/{OTHER}/rerun", params=query, headers=auth).status_code == 200
    alice = {"Authorization": f"Bearer {env.tokens['alice']}"}
    assert env.client.get(f"/idempotent/dags/{DAG_ID}/rerun", params=query, headers=alice).status_code == 403

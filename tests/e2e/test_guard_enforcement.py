"""End to end: the guard holds on every way a backfill comes into existence, and inside the tasks.

A real API server, scheduler and DAG processor (tests/e2e/conftest.py) with the guarded DAG of
tests/e2e/dags/enforced_payouts.py (cap 5). Figures checked: the status and the guard's message
of every credential form Airflow accepts on both backfill routes, bounded bodies, a conf the
database cannot store; `airflow backfill create` refused with zero backfill rows and zero runs,
then approved and written; a backfill created in a process whose enforcement hook is removed
writes zero windows (every task refuses).
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pendulum
import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals
from tests.e2e.conftest import AIRFLOW, AirflowCluster

pytestmark = pytest.mark.e2e

DAG_ID = "idem_e2e_enforced"
DAG_FILE = Path(__file__).with_name("dags") / "enforced_payouts.py"
PER_DAY = 40
DECLARED = {"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}
BACKFILLS = "/api/v2/backfills"
DRY_RUN = "/api/v2/backfills/dry_run"
OVER_CAP = "this backfill covers 6 windows, over the DAG's cap of 5"


def days(first: date, count: int) -> dict[str, str]:
    start = pendulum.datetime(first.year, first.month, first.day, tz="UTC")
    return {"from_date": start.isoformat(), "to_date": start.add(days=count - 1).isoformat()}


@pytest.fixture(scope="module")
def cluster(e2e_dags: Path, request: pytest.FixtureRequest) -> AirflowCluster:
    shutil.copy(DAG_FILE, e2e_dags / DAG_FILE.name)
    cluster: AirflowCluster = request.getfixturevalue("airflow_cluster")
    return cluster


@pytest.fixture(scope="module")
def warehouse(cluster: AirflowCluster) -> Iterator[sa.Engine]:
    path = cluster.home / "enforced_warehouse.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    create_sales(engine, days=31, per_day=PER_DAY)
    create_payouts(engine)
    connection = {"connection_id": "idem_e2e_enf_warehouse", "conn_type": "sqlite", "host": str(path)}
    cluster.request("POST", "/api/v2/connections", connection)
    cluster.wait_for(f"{DAG_ID} to be parsed", lambda: cluster.request("GET", f"/api/v2/dags/{DAG_ID}"), 120)
    yield engine
    engine.dispose()


def raw(
    cluster: AirflowCluster, path: str, body: bytes, headers: dict[str, str], chunked: bool = False
) -> tuple[int, Any]:
    """A request with exactly these headers (http.client sends a tab in a value as it is)."""
    url = urlsplit(cluster.base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
    try:
        sent = {"Content-Type": "application/json", **headers}
        if chunked:
            pieces = [body[i : i + 8192] for i in range(0, len(body), 8192)]
            conn.request("POST", path, body=iter(pieces), headers=sent, encode_chunked=True)
        else:
            conn.request("POST", path, body=body, headers=sent)
        response = conn.getresponse()
        text = response.read().decode(errors="replace")
    finally:
        conn.close()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text


def request_body(count: int, conf: Any = DECLARED, first: date = date(2026, 8, 1)) -> bytes:
    return json.dumps({"dag_id": DAG_ID, "dag_run_conf": conf, **days(first, count)}).encode()


def credential_forms(token: str) -> dict[str, dict[str, str]]:
    return {
        "Bearer": {"Authorization": f"Bearer {token}"},
        "Bearer + two spaces": {"Authorization": f"Bearer  {token}"},
        "Bearer + space + tab": {"Authorization": f"Bearer \t{token}"},
        "lower-case scheme": {"Authorization": f"bearer {token}"},
        "the UI's cookie": {"Cookie": f"_token={token}"},
    }


def backfill_rows(cluster: AirflowCluster) -> list[dict[str, Any]]:
    return list(cluster.request("GET", f"{BACKFILLS}?dag_id={DAG_ID}")["backfills"])


def run_count(cluster: AirflowCluster) -> int:
    return int(cluster.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns?limit=1")["total_entries"])


def test_every_credential_form_gets_the_guards_verdict(cluster: AirflowCluster, warehouse: sa.Engine) -> None:
    token = cluster.token()
    answers: dict[tuple[str, str], tuple[int, str]] = {}
    for form, headers in credential_forms(token).items():
        for path in (BACKFILLS, DRY_RUN):
            status, payload = raw(cluster, path, request_body(6), headers)
            detail = payload.get("detail") if isinstance(payload, dict) else payload
            answers[(form, path)] = (status, str(detail))
    for key, (status, detail) in answers.items():
        assert status == 422 and detail.startswith(OVER_CAP), (key, status, detail)
    # A form Airflow refuses is Airflow's 401, on both routes.
    for path in (BACKFILLS, DRY_RUN):
        assert raw(cluster, path, request_body(6), {"Authorization": f"Bearer\t{token}"})[0] == 401
    assert backfill_rows(cluster) == [] and run_count(cluster) == 0


def test_bounded_bodies_and_unstorable_confs(cluster: AirflowCluster, warehouse: sa.Engine) -> None:
    auth = {"Authorization": f"Bearer {cluster.token()}"}
    big = request_body(2, {**DECLARED, "note": "x" * 70_000})
    for path in (BACKFILLS, DRY_RUN):
        assert raw(cluster, path, big, auth)[0] == 413
        assert raw(cluster, path, big, auth, chunked=True)[0] == 413
        assert raw(cluster, path, big, {})[0] == 413  # before authentication
        deep = b'{"dag_id": "%s", "dag_run_conf": ' % DAG_ID.encode() + b"[" * 10_000 + b"]" * 10_000 + b"}"
        for headers in (auth, {}):
            status, payload = raw(cluster, path, deep, headers)
            assert status == 422 and "deeper than 64 levels" in payload["detail"], (status, payload)
    for conf, expected in (
        ({**DECLARED, "reason": "fix\u0000rates"}, "conf reason must be one line of plain text"),
        ({**DECLARED, "note": "nul \u0000 byte"}, "conf key 'note' holds a character the metadata database"),
    ):
        status, payload = raw(cluster, BACKFILLS, request_body(2, conf), auth)
        assert status == 422 and expected in payload["detail"], (status, payload)
    assert backfill_rows(cluster) == [] and run_count(cluster) == 0
    assert "RecursionError" not in cluster.log("api-server", tail=200_000)


def cli(cluster: AirflowCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRFLOW, *args], env=cluster.env, cwd=cluster.home, capture_output=True, text=True, timeout=300
    )


def wait_runs_done(cluster: AirflowCluster, first: date, count: int) -> list[dict[str, Any]]:
    """The backfill runs of `count` days from `first`, once every one of them has ended."""
    since = f"{first.isoformat()}T00:00:00Z"
    until = f"{(first + timedelta(days=count - 1)).isoformat()}T00:00:00Z"
    query = f"run_type=backfill&logical_date_gte={since}&logical_date_lte={until}&limit=100"

    def done() -> list[dict[str, Any]] | None:
        runs = cluster.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns?{query}")["dag_runs"]
        ended = [r for r in runs if r["state"] in ("success", "failed")]
        return runs if len(runs) == count and len(ended) == count else None

    return list(cluster.wait_for(f"{count} backfill runs from {first}", done, timeout=300))


def test_the_cli_is_refused_with_the_guards_message_then_approved_and_written(
    cluster: AirflowCluster, warehouse: sa.Engine
) -> None:
    window = days(date(2026, 8, 1), 6)
    args = ["backfill", "create", "--dag-id", DAG_ID, "--from-date", window["from_date"]]
    args += ["--to-date", window["to_date"]]
    refused = cli(cluster, *args, "--dag-run-conf", json.dumps(DECLARED))
    assert refused.returncode != 0
    assert f'{OVER_CAP}: split it, or approve exactly this count by adding "approve_windows": 6' in (
        refused.stdout + refused.stderr
    ), refused.stderr[-3000:]
    assert backfill_rows(cluster) == [] and run_count(cluster) == 0

    cluster.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    approved = cli(cluster, *args, "--dag-run-conf", json.dumps({**DECLARED, "approve_windows": 6}))
    assert approved.returncode == 0, approved.stderr[-3000:]
    [created] = backfill_rows(cluster)
    runs = wait_runs_done(cluster, date(2026, 8, 1), 6)
    assert {r["state"] for r in runs} == {"success"}, runs
    for offset in range(6):
        rows, _ = window_totals(warehouse, "payouts", date(2026, 8, 1) + timedelta(days=offset))
        assert rows == PER_DAY
    cluster.wait_for(
        "the backfill to complete",
        lambda: cluster.request("GET", f"{BACKFILLS}/{created['id']}")["completed_at"],
        timeout=60,
    )


BYPASS = """
    import json, sys
    from sqlalchemy import event
    from sqlalchemy.orm import Session
    import airflow.settings  # initialises Airflow: the policy module installs the hook
    from airflow_idempotent.plugins import catchup
    from airflow.models.backfill import _create_backfill
    import pendulum

    event.remove(Session, "before_flush", catchup.enforce_backfill_guard)  # the hook disabled here
    window = json.loads(sys.argv[1])
    backfill = _create_backfill(
        dag_id=sys.argv[2], from_date=pendulum.parse(window["from_date"]),
        to_date=pendulum.parse(window["to_date"]), max_active_runs=3, reverse=False,
        dag_run_conf=json.loads(sys.argv[3]), triggering_user_name="bypass",
    )
    print(backfill.id)
"""


def test_a_backfill_created_behind_the_guards_back_writes_nothing(
    cluster: AirflowCluster, warehouse: sa.Engine
) -> None:
    first = date(2026, 8, 10)
    window = days(first, 6)
    script = cluster.home / "bypass.py"
    script.write_text(textwrap.dedent(BYPASS))
    created = subprocess.run(
        [
            str(Path(AIRFLOW).with_name("python")),
            str(script),
            json.dumps(window),
            DAG_ID,
            json.dumps(DECLARED),
        ],
        env=cluster.env,
        cwd=cluster.home,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert created.returncode == 0, created.stderr[-3000:]
    backfill_id = int(created.stdout.strip().splitlines()[-1])
    cluster.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    runs = wait_runs_done(cluster, first, 6)
    assert {r["state"] for r in runs} == {"failed"}, runs
    for offset in range(6):
        assert window_totals(warehouse, "payouts", first + timedelta(days=offset))[0] == 0
    history = sa.create_engine(cluster.history_url)
    try:
        with history.connect() as conn:
            written = conn.execute(
                sa.text(
                    "SELECT count(*) FROM idem_window_write WHERE dag_id = :d AND run_id IN :runs"
                ).bindparams(sa.bindparam("runs", expanding=True)),
                {"d": DAG_ID, "runs": [r["dag_run_id"] for r in runs]},
            ).scalar_one()
            errors = (
                conn.execute(
                    sa.text("SELECT error FROM idem_task_attempt WHERE dag_id = :d AND error IS NOT NULL"),
                    {"d": DAG_ID},
                )
                .scalars()
                .all()
            )
            sizes = conn.execute(
                sa.text("SELECT windows, approve_windows FROM idem_backfill_size WHERE backfill_id = :b"),
                {"b": backfill_id},
            ).all()
    finally:
        history.dispose()
    assert written == 0
    assert sizes and {tuple(s) for s in sizes} == {(6, None)}
    assert any("covers 6 windows, over the DAG's cap of 5, with no approval" in e for e in errors), errors[:3]

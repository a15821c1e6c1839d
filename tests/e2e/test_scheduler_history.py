"""End to end: a real scheduler, DAG processor, LocalExecutor workers and API server record the history.

One manual run (through the REST API, with conf) and a two-day backfill (POST /api/v2/backfills)
of a one-task DAG. The manual run's task fails its first try, so a real worker reports a retry.
Then a user marks a task instance and a DAG run failed through the API server. The history store
must hold: the scheduler's running + success for every run (run type manual / backfill), the
workers' attempts, and the API server's marks.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.history import HistoryStore
from tests.e2e.conftest import AirflowCluster

pytestmark = pytest.mark.e2e

DAG_ID = "idem_e2e_history"
DAG = f'''
from datetime import datetime, timedelta

from airflow.sdk import dag, task


@dag(
    dag_id="{DAG_ID}",
    schedule="@daily",
    start_date=datetime(2026, 8, 1),
    end_date=datetime(2026, 8, 31),  # in the past: unpausing creates no scheduled run
    catchup=False,
    max_active_runs=3,
)
def idem_e2e_history():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def write(**context):
        if context["dag_run"].run_type == "manual" and context["ti"].try_number == 1:
            raise RuntimeError("manual run: first try fails")
        return context["ds"]

    write()


idem_e2e_history()
'''
CONF = {"semantics": "overwrite", "policy_version": "v2"}


@pytest.fixture(scope="module")
def cluster(e2e_dags: Path, request: pytest.FixtureRequest) -> AirflowCluster:
    (e2e_dags / "idem_e2e_history.py").write_text(DAG)  # before the DAG processor starts
    cluster: AirflowCluster = request.getfixturevalue("airflow_cluster")
    return cluster


def finished_runs(cluster: AirflowCluster) -> list[dict[str, Any]] | None:
    runs = cluster.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns?limit=50")["dag_runs"]
    if len(runs) == 3 and all(r["state"] in ("success", "failed") for r in runs):
        return list(runs)
    return None


def test_scheduler_workers_and_api_server_record_history(cluster: AirflowCluster) -> None:
    cluster.wait_for("the DAG to be parsed", lambda: cluster.request("GET", f"/api/v2/dags/{DAG_ID}"), 120)
    cluster.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    manual = cluster.request(
        "POST",
        f"/api/v2/dags/{DAG_ID}/dagRuns",
        {"logical_date": "2026-08-25T00:00:00Z", "conf": CONF},
    )
    backfill = cluster.request(
        "POST",
        "/api/v2/backfills",
        {"dag_id": DAG_ID, "from_date": "2026-08-20T00:00:00Z", "to_date": "2026-08-21T00:00:00Z"},
    )
    assert backfill["dag_id"] == DAG_ID
    runs = cluster.wait_for("three finished runs", lambda: finished_runs(cluster), timeout=180)
    assert {r["state"] for r in runs} == {"success"}, runs
    run_types = {r["dag_run_id"]: r["run_type"] for r in runs}
    assert sorted(run_types.values()) == ["backfill", "backfill", "manual"]
    assert run_types[manual["dag_run_id"]] == "manual"

    engine = sa.create_engine(cluster.history_url)
    try:
        check_history(cluster, HistoryStore(engine), run_types, manual["dag_run_id"])
    finally:
        engine.dispose()


def check_history(
    cluster: AirflowCluster, store: HistoryStore, run_types: dict[str, str], manual_id: str
) -> None:
    def all_recorded() -> dict[str, list[dict[str, Any]]] | None:
        events: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in store.dag_runs(dag_id=DAG_ID):
            events[e["run_id"]].append(e)
        done = all({"running", "success"} <= {e["event"] for e in events[run_id]} for run_id in run_types)
        return dict(events) if done else None

    events = cluster.wait_for("the scheduler's DAG run events", all_recorded, timeout=30)
    for run_id, run_type in run_types.items():
        got = events[run_id]
        assert [(e["event"], e["source"]) for e in got] == [
            ("running", "scheduler"),
            ("success", "scheduler"),
        ]
        assert {e["run_type"] for e in got} == {run_type}
        assert got[0]["state"] == "running" and got[1]["state"] == "success"
        assert got[0]["at"] <= got[1]["at"]
        assert got[0]["logical_date"] is not None
    manual_events = events[manual_id]
    assert {(e["semantics"], e["policy_version"]) for e in manual_events} == {("overwrite", "v2")}
    days = sorted(events[run_id][0]["logical_date"].date().isoformat() for run_id in run_types)
    assert days == ["2026-08-20", "2026-08-21", "2026-08-25"]

    # The workers' attempts: the manual run retried once, the backfill runs succeeded at once.
    attempts: dict[str, list[tuple[int, str, str | None, str | None]]] = defaultdict(list)
    for a in store.attempts(dag_id=DAG_ID, task_id="write"):
        attempts[a["run_id"]].append((a["try_number"], a["event"], a["state"], a["source"]))
        assert a["run_type"] == run_types[a["run_id"]]
        assert a["hostname"]
    assert attempts[manual_id] == [
        (1, "running", "running", "worker"),
        (1, "up_for_retry", "up_for_retry", "worker"),
        (2, "running", "running", "worker"),
        (2, "success", "success", "worker"),
    ]
    for run_id, run_type in run_types.items():
        if run_type == "backfill":
            assert attempts[run_id] == [
                (1, "running", "running", "worker"),
                (1, "success", "success", "worker"),
            ]

    # A user marks a task instance, then a whole DAG run, failed: the API server's listeners.
    target = next(r for r in run_types if run_types[r] == "backfill")
    cluster.request(
        "PATCH", f"/api/v2/dags/{DAG_ID}/dagRuns/{target}/taskInstances/write", {"new_state": "failed"}
    )
    cluster.request("PATCH", f"/api/v2/dags/{DAG_ID}/dagRuns/{manual_id}", {"state": "failed"})
    marked = store.attempts(dag_id=DAG_ID, run_id=target, event="marked_failed")
    assert [(m["source"], m["state"], m["try_number"]) for m in marked] == [("api_server", "failed", 1)]
    failed = store.dag_runs(dag_id=DAG_ID, run_id=manual_id, event="failed")
    assert [(f["source"], f["state"]) for f in failed] == [("api_server", "failed")]
    assert "manually set" in failed[0]["message"]

"""The run history of any DAG, window writes or not, from a real run.

`airflow dags test` of tests/dags/flaky_history.py (a plain @task failing once then succeeding
on retry, and a window write) with the history store in a fresh PostgreSQL database; then
`airflow-idempotent history --dag ... [--task] [--run] [--json]` must show the DAG run, all four
attempt records of the flaky task and the window write.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent.cli import main
from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals
from tests.test_cli_history import CONN_ENV, fresh_database
from tests.test_dagrun import REPO, airflow
from tests.test_operators import DAY, day_truth

pytestmark = pytest.mark.dagrun

DAG_ID = "flaky_history"


@pytest.fixture(scope="module")
def history_conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_database("postgres", tmp_path_factory.mktemp("runs")) as (_, conn_json):
        yield conn_json


@pytest.fixture
def ran(
    airflow_home: Path, warehouse: Any, history_conn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """One real run of the DAG for DAY; returns its run_id."""
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    monkeypatch.setenv(CONN_ENV, history_conn)
    env = {CONN_ENV: history_conn, "FLAKY_HISTORY_MARKER": str(tmp_path / "marker")}
    airflow("dags", "test", DAG_ID, DAY.isoformat(), dags=REPO / "tests" / "dags", env=env)
    assert window_totals(warehouse.engine, "payouts", DAY) == day_truth(DAY)
    return f"manual__{DAY.isoformat()}T00:00:00+00:00"


def document(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["history", "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_flaky_plain_task_and_window_task_both_visible(ran: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = document(capsys, "--dag", DAG_ID)
    (run,) = doc["runs"]
    assert run["dag_id"] == DAG_ID and run["state"] == "success"
    run_id = run["run_id"]
    assert [e["state"] for e in run["events"]][-1] == "success"

    flaky = [a for a in run["attempts"] if a["task_id"] == "flaky"]
    assert [(a["try_number"], a["state"]) for a in flaky] == [
        (1, "running"),
        (1, "up_for_retry"),
        (2, "running"),
        (2, "success"),
    ]
    for attempt in run["attempts"]:
        assert {"dag_id", "task_id", "run_id", "try_number", "state"} <= set(attempt)
        assert attempt["dag_id"] == DAG_ID and attempt["run_id"] == run_id
    tries = {(t["task_id"], t["try_number"]): t for t in run["tries"]}
    first, second = tries[("flaky", 1)], tries[("flaky", 2)]
    assert first["state"] == "up_for_retry" and first["failed"] is True
    assert "transient: upstream API answered 503" in first["error"]
    assert second["state"] == "success" and second["failed"] is False and second["error"] is None
    for t in (first, second):
        assert t["hostname"] and t["duration_seconds"] is not None and t["duration_seconds"] >= 0
    assert tries[("write_payouts", 1)]["state"] == "success"

    (write,) = run["writes"]
    assert (write["task_id"], write["status"], write["window_label"]) == (
        "write_payouts",
        "written",
        "2026-08-25",
    )
    (window,) = doc["windows"]
    assert window["target"] == "warehouse:payouts" and window["writes"][0]["run_id"] == run_id

    # the plain task alone: its runs and attempts, and no windows (it writes none)
    only = document(capsys, "--dag", DAG_ID, "--task", "flaky")
    assert [len(r["attempts"]) for r in only["runs"]] == [4] and only["windows"] == []
    assert document(capsys, "--dag", DAG_ID, "--run", run_id)["runs"][0]["run_id"] == run_id
    assert document(capsys, "--dag", DAG_ID, "--run", "no_such_run") == {"runs": [], "windows": []}

    # the same in text: the run, each try with state, duration, host and error, then the window
    assert main(["history", "--dag", DAG_ID]) == 0
    out = capsys.readouterr().out
    assert f"{DAG_ID}  run {run_id}" in out and "state success" in out
    rows = [line.split("|") for line in out.splitlines() if re.match(r"\s*(flaky|write_payouts)\s+\|", line)]
    states = [(r[0].strip(), r[1].strip(), r[2].strip()) for r in rows]
    assert states == [
        ("flaky", "1", "up_for_retry"),
        ("flaky", "2", "success"),
        ("write_payouts", "1", "success"),
    ]
    assert "transient: upstream API answered 503" in rows[0][7]
    assert all(r[5].strip() not in ("", "-") for r in rows)  # the host
    assert re.match(r"\d+\.\d\d s", rows[0][4].strip())
    assert "warehouse:payouts 2026-08-25 written" in rows[2][6]
    assert "1 DAG run(s), 3 task attempt(s)" in out
    assert "warehouse:payouts  window 2026-08-25" in out


# --------------------------------------------------------------------------------------------
# A try whose process was killed: no end recorded; Airflow's state is shown once Airflow ends it.
# --------------------------------------------------------------------------------------------

KILLED_DAG = "killed_history"


def _airflow_ends_the_try(dag_id: str, run_id: str) -> None:
    """What the scheduler does when the task's heartbeat stops (`task_instance_heartbeat_timeout`):
    the try becomes failed (no retries left), then the DAG run fails. Through Airflow's own models
    and metadata database, as the scheduler writes them."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, State, TaskInstanceState

    with create_session() as session:
        (ti,) = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id).all()
        assert ti.state in State.unfinished  # Airflow too saw no end: the process died
        ti.set_state(TaskInstanceState.FAILED, session=session)
        run = session.query(DagRun).filter_by(dag_id=dag_id, run_id=run_id).one()
        run.set_state(DagRunState.FAILED)


def _airflow_parks_the_try(dag_id: str, run_id: str, state: str) -> None:
    """Airflow's metadata database says the try has not ended but waits: deferred, or parked for a
    person's input (`awaiting_input`, Airflow 3.3), as its execution API writes them."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        (ti,) = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id).all()
        ti.set_state(state, session=session)


def airflow_unfinished_try_states() -> list[str]:
    """Airflow's own unfinished task instance states, but `up_for_retry` (that try has ended: its
    retry is the next try), from the installed Airflow rather than from the code under test."""
    from airflow.utils.state import State, TaskInstanceState

    return sorted(str(s) for s in State.unfinished if s is not None and s != TaskInstanceState.UP_FOR_RETRY)


def test_a_killed_try_does_not_stay_running(
    airflow_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "history.db"
    conn_json = json.dumps({"conn_type": "sqlite", "host": str(history)})
    monkeypatch.setenv(CONN_ENV, conn_json)
    env = {
        **os.environ,
        CONN_ENV: conn_json,
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "tests" / "dags"),
    }
    day = "2026-08-20"
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "dags", "test", KILLED_DAG, day],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])

    # What the listener recorded: the try started, and nothing after (the process died).
    (run,) = document(capsys, "--dag", KILLED_DAG)["runs"]
    assert [a["event"] for a in run["attempts"]] == ["running"]
    (attempt,) = run["tries"]
    assert attempt["state"] == "running" and "reconciled" not in attempt  # Airflow says running too
    assert run["logical_date"].startswith(day)

    # a try Airflow has not ended (deferred, parked for an approval, ...) is not reconciled as ended
    states = airflow_unfinished_try_states()
    assert "awaiting_input" in states and "deferred" in states
    for state in states:
        _airflow_parks_the_try(KILLED_DAG, run["run_id"], state)
        (run,) = document(capsys, "--dag", KILLED_DAG)["runs"]
        (attempt,) = run["tries"]
        assert (attempt["state"], attempt["ended_at"], "reconciled" in attempt) == ("running", None, False)

    _airflow_ends_the_try(KILLED_DAG, run["run_id"])
    (run,) = document(capsys, "--dag", KILLED_DAG)["runs"]
    (attempt,) = run["tries"]
    assert (attempt["state"], attempt["failed"], attempt["reconciled"]) == ("failed", True, "airflow")
    assert attempt["ended_at"] is not None
    assert (run["state"], run["reconciled"]) == ("failed", "airflow")
    assert [a["event"] for a in run["attempts"]] == ["running"]  # what was recorded is kept
    (failed,) = document(capsys, "--flag", "failed")["runs"]  # listed among the failed runs
    assert (failed["dag_id"], failed["state"]) == (KILLED_DAG, "failed")
    assert main(["history", "--dag", KILLED_DAG]) == 0
    out, _ = capsys.readouterr()
    assert "failed (per Airflow; no end recorded)" in out

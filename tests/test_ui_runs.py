"""The UI's run-history page shows DAG runs and every try, also of a DAG that writes no windows,
scoped to the DAGs the user may read (the app and users of tests/test_ui.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_idempotent.history.store import AttemptRecord, DagRunRecord
from tests.test_ui import GUARDED, UNGUARDED, bearer, call, env  # noqa: F401  (env: the fixture)

FLAKY_RUN = "manual__2026-08-09T00:00:00+00:00"
HIDDEN_RUN = "manual__2026-08-10T00:00:00+00:00"


def at(minute: int) -> datetime:
    return datetime(2026, 8, 9, 6, minute, tzinfo=UTC)


def seed_runs(store: Any) -> None:
    """ui_unguarded (no window writes): a plain task failing once, then succeeding; one attempt of
    ui_guarded, which the outsider may not read."""
    store.record(DagRunRecord(dag_id=UNGUARDED, run_id=FLAKY_RUN, event="running", at=at(0), state="running"))
    for try_number, event, minute in (
        (1, "running", 0),
        (1, "up_for_retry", 1),
        (2, "running", 2),
        (2, "success", 3),
    ):
        store.record(
            AttemptRecord(
                dag_id=UNGUARDED,
                run_id=FLAKY_RUN,
                task_id="flaky",
                map_index=-1,
                try_number=try_number,
                event=event,
                at=at(minute),
                state=event,
                hostname="worker-7",
                error="RuntimeError: upstream 503" if event == "up_for_retry" else None,
            )
        )
    store.record(DagRunRecord(dag_id=UNGUARDED, run_id=FLAKY_RUN, event="success", at=at(4), state="success"))
    store.record(
        AttemptRecord(
            dag_id=GUARDED, run_id=HIDDEN_RUN, task_id="write_payouts", map_index=-1, try_number=1,
            event="running", at=at(5), state="running",
        )
    )  # fmt: skip


def test_runs_of_a_dag_without_window_writes_scoped_to_the_reader(env: dict[str, Any]) -> None:  # noqa: F811
    seed_runs(env["store"])
    page = call(env, "GET", f"/idempotent/dags/{UNGUARDED}/history", headers=bearer(env))
    assert page.status_code == 200
    text = page.text
    assert "DAG runs" in text and FLAKY_RUN in text and "up_for_retry" in text
    assert "RuntimeError: upstream 503" in text and "worker-7" in text and "1 failed" in text
    assert HIDDEN_RUN not in text  # another DAG's run is not on this DAG's page

    everything = call(env, "GET", "/idempotent/history", headers=bearer(env)).text
    assert FLAKY_RUN in everything and HIDDEN_RUN in everything
    outsider = call(env, "GET", "/idempotent/history", headers=bearer(env, "outsider")).text
    assert FLAKY_RUN in outsider and HIDDEN_RUN not in outsider  # may not read ui_guarded


def test_the_history_api_answers_runs_scoped_to_the_reader(env: dict[str, Any]) -> None:  # noqa: F811
    seed_runs(env["store"])
    answer = call(env, "GET", f"/idempotent/api/dags/{UNGUARDED}/history", headers=bearer(env)).json()
    (run,) = [r for r in answer["runs"] if r["run_id"] == FLAKY_RUN]
    assert run["state"] == "success" and answer["windows"] == []
    assert [(a["try_number"], a["state"]) for a in run["attempts"]] == [
        (1, "running"),
        (1, "up_for_retry"),
        (2, "running"),
        (2, "success"),
    ]
    assert all({"dag_id", "task_id", "run_id", "try_number", "state"} <= set(a) for a in run["attempts"])
    assert [(t["try_number"], t["state"], t["duration_seconds"]) for t in run["tries"]] == [
        (1, "up_for_retry", 60.0),
        (2, "success", 60.0),
    ]
    outsider = call(env, "GET", "/idempotent/api/history", headers=bearer(env, "outsider")).json()
    assert {r["dag_id"] for r in outsider["runs"]} <= {UNGUARDED, "ui_other"}
    assert FLAKY_RUN in {r["run_id"] for r in outsider["runs"]}

"""The reconciler's states against the installed Airflow's own: a try Airflow has not ended (a
deferred one, one parked for a person's input) is never shown as ended; a finished one is.

The behaviour on a real Airflow metadata database (a killed try parked in each unfinished state,
then failed) is tests/test_history_runs.py::test_a_killed_try_does_not_stay_running.
"""

from __future__ import annotations

from airflow.utils.state import DagRunState, State, TaskInstanceState

from airflow_idempotent.history.reconcile import UNFINISHED


def values(states: frozenset[TaskInstanceState | None]) -> set[str | None]:
    return {s.value if s is not None else None for s in states}


def test_every_unfinished_airflow_state_but_up_for_retry_is_not_reconciled() -> None:
    # up_for_retry: that try ended (Airflow's retry is the next try), so it is reconciled
    waiting = values(State.unfinished) - {TaskInstanceState.UP_FOR_RETRY.value}
    assert {"awaiting_input", "deferred", "running", None} <= waiting
    assert set(UNFINISHED) == waiting
    assert "up_for_retry" not in UNFINISHED
    assert not values(State.finished) & set(UNFINISHED)
    assert {DagRunState.QUEUED.value, DagRunState.RUNNING.value} <= set(UNFINISHED)
    assert not {DagRunState.SUCCESS.value, DagRunState.FAILED.value} & set(UNFINISHED)

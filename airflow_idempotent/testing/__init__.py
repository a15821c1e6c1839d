"""Prove DAGs and tasks idempotent: run a window N times with crashes, compare with one clean run.

    from airflow_idempotent.testing import assert_idempotent

    def test_payouts_rerun_safely(engine):
        assert_idempotent("dags/payouts.py", "2026-05-01", dag_id="payouts_merge", engine=engine)

In pytest the fixture ``idempotency`` (plugin ``airflow_idempotent.testing.pytest_plugin``) does the
same with the run's options (``--idem-runs``, ``--idem-crashes``, ``--idem-seed``).

Importing this package is cheap and reads no Airflow configuration (Airflow is imported when a
check runs).

Modules: `harness` (the check), `scenarios` (crash points and plans), `attempt` (one forked
attempt), `context` (the run's context), `tables` (reading and comparing tables), `report` (the
verdict), `dagfile` (loading a DAG file), `errors`.
"""

from __future__ import annotations

# Nothing here imports Airflow at module level, so this stays cheap.
from airflow_idempotent.testing.dagfile import load_dag
from airflow_idempotent.testing.errors import HarnessError
from airflow_idempotent.testing.harness import Harness, assert_idempotent, check_idempotent
from airflow_idempotent.testing.report import Attempt, HarnessReport, NotIdempotentError, ScenarioResult
from airflow_idempotent.testing.scenarios import CRASH_POINTS, Crash
from airflow_idempotent.testing.tables import TableDiff, TableState, compare_tables

__all__ = [
    "CRASH_POINTS",
    "Attempt",
    "Crash",
    "Harness",
    "HarnessError",
    "HarnessReport",
    "NotIdempotentError",
    "ScenarioResult",
    "TableDiff",
    "TableState",
    "assert_idempotent",
    "check_idempotent",
    "compare_tables",
    "load_dag",
]

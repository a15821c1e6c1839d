"""Prove DAGs and tasks idempotent: run a window N times with crashes, compare with one clean run.

    from airflow_idempotent.testing import assert_idempotent

    def test_payouts_rerun_safely(engine):
        assert_idempotent("dags/payouts.py", "2026-05-01", dag_id="payouts_merge", engine=engine)

In pytest the fixture ``idempotency`` (plugin ``airflow_idempotent.testing.pytest_plugin``) does the
same with the run's options (``--idem-runs``, ``--idem-crashes``, ``--idem-seed``).

Importing this package is cheap and reads no Airflow configuration (Airflow is imported when a
check runs).
"""

from __future__ import annotations

# The harness imports nothing from Airflow at module level, so this stays cheap.
from airflow_idempotent.testing import harness as _harness
from airflow_idempotent.testing.harness import *  # noqa: F403

__all__ = list(_harness.__all__)

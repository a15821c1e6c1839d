"""SIGKILL inside the operator's own transaction: nothing is committed, the rerun gives the truth.

The write runs in a child process that kills itself with SIGKILL at a chosen statement of the
transaction (after the DELETE, after the INSERT before commit): a real crash, not an exception.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent.examples.payouts import (
    create_payouts,
    create_sales,
    simulate_crash,
    table_checksum,
    window_totals,
)
from tests.test_operators import DAY, context, day_truth, make

REPO = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import pendulum
    import airflow_idempotent.adapters.base as base
    from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator
    from airflow_idempotent.examples.payouts import PAYOUT_SQL

    strategy, kill_at = sys.argv[1], int(sys.argv[2])
    real = base.EngineAdapter.execute
    writes = 0

    def execute(self, conn, expression, params):
        global writes
        result = real(self, conn, expression, params)
        if expression.key in ("delete", "insert"):
            writes += 1
            if writes == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        return result

    base.EngineAdapter.execute = execute
    kwargs = dict(task_id="w", conn_id="warehouse", table="payouts", partition_column="sale_date",
                  sql=PAYOUT_SQL, parameters={"policy_version": "v1"}, granularity="day")
    if strategy == "merge":
        op = MergeOperator(key_columns=["sale_id"], delete_missing=True, **kwargs)
    else:
        op = PartitionOverwriteOperator(**kwargs)
    at = pendulum.datetime(2026, 8, 25, tz="UTC")
    op.execute({"logical_date": at, "data_interval_start": at, "data_interval_end": at})
    print("not killed")
    """
)


@pytest.mark.parametrize(
    "strategy, kill_at",
    [("overwrite", 1), ("overwrite", 2), ("merge", 1), ("merge", 2)],
    ids=["overwrite-after-delete", "overwrite-after-insert", "merge-after-delete", "merge-after-upsert"],
)
def test_sigkill_mid_transaction_commits_nothing(warehouse: Any, strategy: str, kill_at: int) -> None:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    simulate_crash(warehouse.engine, DAY, rows=1247)
    before = table_checksum(warehouse.engine, "payouts")
    warehouse.engine.dispose()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, strategy, str(kill_at)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert table_checksum(warehouse.engine, "payouts") == before
    for _ in range(2):
        make(strategy).execute(context())
        assert window_totals(warehouse.engine, "payouts", DAY) == day_truth(DAY)

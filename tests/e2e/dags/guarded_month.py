"""The project's guarded payouts DAG, for the guarded-month end-to-end test (tests/e2e/test_guarded_month.py).

A copy of `payouts_overwrite` in dags/payouts.py: the same guard (the `GUARD = ...` line is
the project's, checked by the test), the same policy param, SQL and operator. It differs only in
what an end-to-end cluster needs:

- dag_id `idem_e2e_payouts_overwrite` and the warehouse connection `idem_e2e_month_warehouse`
  (a fresh PostgreSQL database the test creates, with `sales` and `payouts` already in it, so
  there is no `ensure_table` task: one task instance per window);
- `end_date` at the end of August 2026: the month is in the past, so unpausing creates no
  scheduled run; only the test's backfills run;
- a short retry delay: a guard refusal never retries (it is a fail exception), anything else
  must not keep the test waiting five minutes.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig, Thresholds
from airflow_idempotent.operators import PartitionOverwriteOperator

CONN_ID = "idem_e2e_month_warehouse"
START = pendulum.datetime(2026, 8, 1, tz="UTC")
END = pendulum.datetime(2026, 8, 31, tz="UTC")
PARAMS = {
    "policy_version": Param(
        "v1",
        type="string",
        enum=["v1", "v2"],
        description="Payout policy: v1 flat 0.60; v2 0.55 at or above 400.00.",
    )
}
POLICY = {"policy_version": "{{ params.policy_version }}"}
GUARD = GuardConfig(cap=31, measures=["amount_eur"], thresholds=Thresholds(max_shrink=0.10))
GUARDED_PARAMS = {**PARAMS, **GUARD.param()}

with DAG(
    dag_id="idem_e2e_payouts_overwrite",
    schedule="@daily",
    start_date=START,
    end_date=END,
    catchup=False,
    params=GUARDED_PARAMS,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=2)},
    tags=["idempotent", "payouts", "e2e"],
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id=CONN_ID,
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        parameters=POLICY,
        granularity="day",
    )

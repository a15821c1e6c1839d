"""A guarded payouts DAG whose breaches wait for a person (tests/e2e/test_approval.py).

`payouts_overwrite` of dags/payouts.py with `on_breach="approve"`: a corrective backfill whose diff
breaks a threshold keeps its staged rows and asks for an approval in Airflow's required actions.
Its own warehouse connection and dag_id; `end_date` in the past, so only the test's backfills run.
The second DAG is the same task with a 36-second approval timeout, for the real timeout path.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig, Thresholds
from airflow_idempotent.operators import PartitionOverwriteOperator

CONN_ID = "idem_e2e_approval_warehouse"
GUARD = GuardConfig(
    cap=31,
    measures=["amount_eur"],
    thresholds=Thresholds(max_shrink=0.10),
    on_breach="approve",
    approval_timeout_hours=1,
)


def payouts_dag(dag_id: str, guard: GuardConfig, start: pendulum.DateTime, end: pendulum.DateTime) -> DAG:
    with DAG(
        dag_id=dag_id,
        schedule="@daily",
        start_date=start,
        end_date=end,
        catchup=False,
        params={"policy_version": Param("v1", type="string", enum=["v1", "v2"]), **guard.param()},
        default_args={
            "retries": 2,
            "retry_delay": timedelta(seconds=2),
        },  # infra hiccups only: a refusal never retries
        tags=["idempotent", "payouts", "e2e"],
    ) as dag:
        PartitionOverwriteOperator(
            task_id="write_payouts",
            conn_id=CONN_ID,
            table="payouts",
            partition_column="sale_date",
            key_columns=["sale_id"],
            sql=PAYOUT_SQL,
            parameters={"policy_version": "{{ params.policy_version }}"},
            granularity="day",
        )
    return dag


payouts_dag(
    "idem_e2e_payouts_approval",
    GUARD,
    pendulum.datetime(2026, 8, 24, tz="UTC"),
    pendulum.datetime(2026, 8, 25, tz="UTC"),
)
payouts_dag(
    "idem_e2e_payouts_approval_timeout",
    dataclasses.replace(GUARD, approval_timeout_hours=0.01),
    pendulum.datetime(2026, 8, 26, tz="UTC"),
    pendulum.datetime(2026, 8, 26, tz="UTC"),
)

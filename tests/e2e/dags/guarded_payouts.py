"""DAGs for the backfill guard's end-to-end test (copied into the cluster's DAGs folder).

- idem_e2e_guarded_payouts: guarded (cap 5), payouts by partition overwrite of a SQLite warehouse
  through the connection `idem_e2e_warehouse`, one window per day (zero-width @daily interval +
  granularity "day", the case the guard computes windows for from the logical date).
- idem_e2e_unguarded: the same schedule and no guard; its backfills must pass untouched.

end_date in the past: unpausing creates no scheduled run, only backfills run.
"""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig
from airflow_idempotent.operators import PartitionOverwriteOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")
END = pendulum.datetime(2026, 8, 31, tz="UTC")

with DAG(
    dag_id="idem_e2e_guarded_payouts",
    schedule="@daily",
    start_date=START,
    end_date=END,
    catchup=False,
    max_active_runs=2,
    params={"policy_version": Param("v1", type="string", enum=["v1", "v2"]), **GuardConfig(cap=5).param()},
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="idem_e2e_warehouse",
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        parameters={"policy_version": "{{ params.policy_version }}"},
        granularity="day",
    )

with DAG(
    dag_id="idem_e2e_unguarded",
    schedule="@daily",
    start_date=START,
    end_date=END,
    catchup=False,
):
    EmptyOperator(task_id="noop")

"""The DAG of the guard's enforcement end-to-end test (tests/e2e/test_guard_enforcement.py).

idem_e2e_enforced: guarded (cap 5), payouts by partition overwrite of its own SQLite warehouse
(connection `idem_e2e_enf_warehouse`), one window per day; a free-text `note` param (a conf
may carry it; the guard checks it can be stored). end_date in the past: only backfills run.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig
from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="idem_e2e_enforced",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2026, 8, 31, tz="UTC"),
    catchup=False,
    max_active_runs=3,
    params={
        "policy_version": Param("v1", type="string", enum=["v1", "v2"]),
        "note": Param("", type="string"),
        **GuardConfig(cap=5).param(),
    },
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="idem_e2e_enf_warehouse",
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        parameters={"policy_version": "{{ params.policy_version }}"},
        granularity="day",
    )

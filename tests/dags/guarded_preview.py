"""A test DAG for the rerun preview: a guarded window write with a completeness check, and a file
delivered once per window (an effect)."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.effects import FileDeliveryEffectOperator
from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig
from airflow_idempotent.operators import PartitionOverwriteOperator

GUARD = GuardConfig(
    measures=["amount_eur"],
    completeness_sql=(
        "SELECT count(*) = 2000 FROM sales s WHERE s.sale_date >= :window_start AND s.sale_date < :window_end"
    ),
)

with DAG(
    dag_id="guarded_preview",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
    catchup=False,
    params={"policy_version": "v1", **GUARD.param()},
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="warehouse",
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        parameters={"policy_version": "{{ params.policy_version }}"},
        granularity="day",
    ) >> FileDeliveryEffectOperator(
        task_id="deliver_file",
        directory=os.environ.get("GUARDED_PREVIEW_DIR", "/nonexistent"),
        filename="payouts-{{ ds }}.txt",
        content="payouts delivered\n",
        granularity="day",
    )

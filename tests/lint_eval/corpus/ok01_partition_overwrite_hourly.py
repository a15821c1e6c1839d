"""Hourly payments facts written by partition overwrite."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="payments_hourly",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    PartitionOverwriteOperator(
        task_id="write_payments_hour",
        conn_id="warehouse",
        table="payments_hourly",
        partition_column="paid_at",
        sql=(
            "SELECT p.payment_id, p.paid_at, p.amount_eur FROM payments p "
            "WHERE p.paid_at >= :window_start AND p.paid_at < :window_end"
        ),
    )

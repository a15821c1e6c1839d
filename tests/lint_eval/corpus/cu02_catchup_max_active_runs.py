"""Backfill-friendly hourly rollup: catchup on, one run at a time."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="hourly_rollup",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 6, 1, tz="UTC"),
    catchup=True,
    max_active_runs=1,
):
    PartitionOverwriteOperator(
        task_id="write_hour",
        conn_id="warehouse",
        table="hourly_orders",
        partition_column="order_hour",
        sql=(
            "SELECT date_trunc('hour', created_at) AS order_hour, COUNT(*) AS orders FROM orders "
            "WHERE created_at >= :window_start AND created_at < :window_end GROUP BY 1"
        ),
    )

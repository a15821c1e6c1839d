# Lint corpus: shared target, first writer (lint this folder as a whole)
# expect: IDEM007@19
# expect-ack: none
"""Nightly orders rollup by overwrite."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="shared_a_rollup",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    PartitionOverwriteOperator(
        task_id="write_orders",
        table="shared_orders",
        partition_column="order_date",
        granularity="day",
        sql="SELECT order_id, order_date FROM raw_orders "
        "WHERE order_date >= :window_start AND order_date < :window_end",
    )

# Lint corpus: catchup=True with an end_date: bounded
# expect: none
# expect-ack: none
"""A one-off, bounded rebuild of Q1: catchup with an end_date."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="c12_q1_rebuild",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2026, 3, 31, tz="UTC"),
    catchup=True,
):
    PartitionOverwriteOperator(
        task_id="rebuild_day",
        table="c12_daily_orders",
        partition_column="order_date",
        granularity="day",
        sql="SELECT order_date, COUNT(*) AS orders FROM orders "
        "WHERE order_date >= :window_start AND order_date < :window_end GROUP BY order_date",
    )

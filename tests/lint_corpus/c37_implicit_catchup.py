# Lint corpus: no catchup= on an Airflow 2 DAG (schedule_interval=): the deployment's default, on,
# over a task that takes the run's window: each caught-up run writes its own day (information, round 36b)
# expect: none
# expect-ack: none
"""The same run-window rebuild as c11, but catching up because nobody said otherwise."""

from __future__ import annotations

from datetime import datetime

from airflow import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="c37_history_rebuild",
    schedule_interval="@daily",
    start_date=datetime(2020, 1, 1),
) as dag:
    PartitionOverwriteOperator(
        task_id="rebuild_day",
        table="c37_daily_orders",
        partition_column="order_date",
        granularity="day",
        sql="SELECT order_date, COUNT(*) AS orders FROM orders "
        "WHERE order_date >= :window_start AND order_date < :window_end GROUP BY order_date",
    )

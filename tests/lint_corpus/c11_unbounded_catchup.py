# Lint corpus: catchup=True since 2020, no end_date, tasks on the run's window: IDEM005 as information
# expect: none
# expect-ack: none
"""Every day since 2020 is created as a run the moment this DAG is unpaused: chosen (catchup=True), and
each run rewrites its own day, so the backlog is listed as information (its size, and that
max_active_runs/end_date are not set), not failed; c37 is the same DAG catching up by default."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="c11_history_rebuild",
    schedule="@daily",
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=True,
):
    PartitionOverwriteOperator(
        task_id="rebuild_day",
        table="c11_daily_orders",
        partition_column="order_date",
        granularity="day",
        sql="SELECT order_date, COUNT(*) AS orders FROM orders "
        "WHERE order_date >= :window_start AND order_date < :window_end GROUP BY order_date",
    )

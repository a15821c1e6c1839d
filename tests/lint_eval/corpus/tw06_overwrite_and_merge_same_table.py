"""Order facts: a daily partition overwrite, plus a late-arrivals merge into the same table."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator

WINDOW = "o.order_date >= :window_start AND o.order_date < :window_end"

with DAG(
    dag_id="fct_orders",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    daily = PartitionOverwriteOperator(
        task_id="write_orders_day",
        conn_id="warehouse",
        table="fct_orders",
        partition_column="order_date",
        granularity="day",
        sql=f"SELECT o.order_id, o.order_date, o.amount FROM orders o WHERE {WINDOW}",
    )
    late = MergeOperator(
        task_id="merge_late_orders",
        conn_id="warehouse",
        table="fct_orders",
        key_columns=["order_id"],
        partition_column="order_date",
        granularity="day",
        sql=f"SELECT o.order_id, o.order_date, o.amount FROM late_orders o WHERE {WINDOW}",
    )
    daily >> late

# Lint corpus: now() let through allow_functions: acknowledged
# expect: none
# expect-ack: IDEM001@25
"""A load timestamp column on purpose: now() is listed in allow_functions."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="c26_loaded_at",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    PartitionOverwriteOperator(
        task_id="write_orders",
        table="c26_orders",
        partition_column="order_date",
        granularity="day",
        allow_functions=["now"],
        sql="SELECT order_id, order_date, now() AS loaded_at FROM raw_orders "
        "WHERE order_date >= :window_start AND order_date < :window_end",
    )

"""A bounded backfill DAG and an asset-triggered DAG, both with catchup=True."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Asset

from airflow_idempotent.operators import PartitionOverwriteOperator

raw_orders = Asset("postgres://warehouse/public/orders")

with DAG(
    dag_id="orders_2024_backfill",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    end_date=pendulum.datetime(2024, 12, 31, tz="UTC"),
    catchup=True,
):
    PartitionOverwriteOperator(
        task_id="write_day",
        conn_id="warehouse",
        table="daily_orders",
        partition_column="order_date",
        granularity="day",
        sql="SELECT order_date, COUNT(*) AS orders FROM orders "
        "WHERE order_date >= :window_start AND order_date < :window_end GROUP BY 1",
    )

with DAG(dag_id="orders_on_update", schedule=[raw_orders], catchup=True):
    PartitionOverwriteOperator(
        task_id="write_latest_day",
        conn_id="warehouse",
        table="daily_orders_latest",
        partition_column="order_date",
        granularity="day",
        sql="SELECT order_date, COUNT(*) AS orders FROM orders "
        "WHERE order_date >= :window_start AND order_date < :window_end GROUP BY 1",
    )

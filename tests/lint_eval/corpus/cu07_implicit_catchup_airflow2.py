"""Daily export written for Airflow 2: no catchup=, so the deployment's default (on) decides."""

from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG(
    "orders_export_daily",
    schedule_interval="@daily",
    start_date=datetime(2021, 6, 1),
    default_args={"owner": "analytics", "retries": 1},
) as dag:
    SQLExecuteQueryOperator(
        task_id="export_orders",
        conn_id="warehouse",
        sql="""
            DELETE FROM exports.orders_daily WHERE order_date = '{{ ds }}';
            INSERT INTO exports.orders_daily (order_date, orders)
            SELECT order_date, COUNT(*) FROM sales.orders WHERE order_date = '{{ ds }}' GROUP BY order_date
        """,
    )

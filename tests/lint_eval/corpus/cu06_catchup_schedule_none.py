"""Manually triggered re-processing DAG; catchup=True has no windows to create."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="reprocess_orders",
    schedule=None,
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=True,
    params={"day": "2025-01-01"},
):
    SQLExecuteQueryOperator(
        task_id="reprocess_day",
        conn_id="postgres_dw",
        sql="""
            DELETE FROM dw.orders_clean WHERE order_date = '{{ params.day }}';
            INSERT INTO dw.orders_clean SELECT * FROM raw.orders WHERE order_date = '{{ params.day }}';
        """,
    )

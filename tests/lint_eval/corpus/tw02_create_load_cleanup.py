"""Staging pattern: create the target if missing, load through a scratch table, drop the scratch."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="orders_staged_merge",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    create = SQLExecuteQueryOperator(
        task_id="create_target",
        conn_id="postgres_dw",
        sql="CREATE TABLE IF NOT EXISTS dw.orders (order_id BIGINT PRIMARY KEY, status TEXT, amount NUMERIC)",
    )
    load = SQLExecuteQueryOperator(
        task_id="merge_orders",
        conn_id="postgres_dw",
        sql="""
            CREATE TEMP TABLE orders_scratch AS
            SELECT order_id, status, amount FROM landing.orders WHERE order_date = '{{ ds }}';
            INSERT INTO dw.orders SELECT * FROM orders_scratch
            ON CONFLICT (order_id) DO UPDATE SET status = EXCLUDED.status, amount = EXCLUDED.amount;
        """,
    )
    cleanup = SQLExecuteQueryOperator(
        task_id="drop_landing_copy",
        conn_id="postgres_dw",
        sql="DROP TABLE IF EXISTS landing.orders_{{ ds_nodash }}",
    )
    create >> load >> cleanup

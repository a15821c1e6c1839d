"""Today's open orders, rewritten every morning in Snowflake."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="open_orders_today",
    schedule="0 7 * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="refresh_open_orders",
        conn_id="snowflake_default",
        sql=[
            "DELETE FROM ops.open_orders WHERE snapshot_date = CURRENT_DATE()",
            """
            INSERT INTO ops.open_orders (snapshot_date, order_id, status)
            SELECT CURRENT_DATE(), order_id, status
            FROM core.orders
            WHERE status IN ('placed', 'packed')
            """,
        ],
    )

# Lint corpus: DELETE the window then INSERT it, in one task: idempotent
# expect: none
# expect-ack: none
"""Delete the day, insert the day: both statements in one task (one transaction)."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c04_orders_daily",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    SQLExecuteQueryOperator(
        task_id="rewrite_day",
        conn_id="warehouse",
        sql=[
            "DELETE FROM c04_orders_daily WHERE order_date = '{{ ds }}'",
            "INSERT INTO c04_orders_daily (order_date, orders) "
            "SELECT order_date, COUNT(*) FROM orders WHERE order_date = '{{ ds }}' GROUP BY order_date",
        ],
    )

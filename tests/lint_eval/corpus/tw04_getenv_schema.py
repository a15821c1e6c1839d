"""Schema chosen per environment from an environment variable with a default."""

from __future__ import annotations

import os

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

SCHEMA = os.getenv("DW_SCHEMA", "analytics")

with DAG(
    dag_id="orders_by_env",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    orders = SQLExecuteQueryOperator(
        task_id="rewrite_orders",
        conn_id="postgres_dw",
        sql=f"DELETE FROM {SCHEMA}.orders WHERE order_date = '{{{{ ds }}}}'; "
        f"INSERT INTO {SCHEMA}.orders SELECT * FROM raw.orders WHERE order_date = '{{{{ ds }}}}'",
    )
    cancel = SQLExecuteQueryOperator(
        task_id="mark_cancellations",
        conn_id="postgres_dw",
        sql=f"UPDATE {SCHEMA}.orders o SET status = 'cancelled' FROM raw.cancellations c "
        "WHERE c.order_id = o.order_id AND c.cancelled_on = '{{ ds }}'",
    )
    customers = SQLExecuteQueryOperator(
        task_id="rewrite_customers",
        conn_id="postgres_dw",
        sql=f"TRUNCATE {SCHEMA}.customers; INSERT INTO {SCHEMA}.customers SELECT * FROM raw.customers",
    )
    orders >> cancel >> customers

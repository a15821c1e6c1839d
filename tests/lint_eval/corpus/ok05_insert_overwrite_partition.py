"""Databricks SQL: each run overwrites its own date partition."""

from __future__ import annotations

import pendulum
from airflow.providers.databricks.operators.databricks_sql import DatabricksSqlOperator
from airflow.sdk import DAG

with DAG(
    dag_id="lakehouse_orders",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    DatabricksSqlOperator(
        task_id="overwrite_partition",
        databricks_conn_id="databricks_default",
        sql="""
            INSERT OVERWRITE TABLE lakehouse.orders PARTITION (order_date = '{{ ds }}')
            SELECT order_id, customer_id, amount FROM bronze.orders WHERE order_date = '{{ ds }}'
        """,
    )

"""Astro project: SQL kept under include/, referenced by its path inside the image."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="orders_from_include",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"owner": "data-eng", "retries": 2},
):
    SQLExecuteQueryOperator(
        task_id="append_orders",
        conn_id="snowflake_default",
        sql="/usr/local/airflow/include/sql/orders_append.sql",
    )

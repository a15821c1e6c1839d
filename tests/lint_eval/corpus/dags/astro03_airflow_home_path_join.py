"""Customer dimension: DDL and merge from include/, paths joined onto AIRFLOW_HOME."""

from __future__ import annotations

import os

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

SQL_DIR = os.path.join(os.environ.get("AIRFLOW_HOME", "/usr/local/airflow"), "include", "sql")

with DAG(
    dag_id="dim_customer",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    create = SQLExecuteQueryOperator(
        task_id="create_dim_customer",
        conn_id="postgres_dw",
        sql=os.path.join(SQL_DIR, "create_dim_customer.sql"),
    )
    merge = SQLExecuteQueryOperator(
        task_id="merge_dim_customer",
        conn_id="postgres_dw",
        sql=os.path.join(SQL_DIR, "merge_dim_customer.sql"),
    )
    create >> merge

"""Revenue mart; template_searchpath built from AIRFLOW_HOME like the Astro CLI template does."""

from __future__ import annotations

import os

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

AIRFLOW_HOME = os.getenv("AIRFLOW_HOME", "/usr/local/airflow")

with DAG(
    dag_id="daily_revenue",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    template_searchpath=[f"{AIRFLOW_HOME}/include/sql"],
):
    SQLExecuteQueryOperator(task_id="revenue_last_24h", conn_id="postgres_dw", sql="daily_revenue.sql")

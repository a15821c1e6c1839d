"""Small self-hosted Airflow: daily signup counter in SQLite."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="signup_counter",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="count_signups",
        conn_id="sqlite_app",
        sql="""
            INSERT OR REPLACE INTO daily_signups (day, signups)
            SELECT date('now'), COUNT(*) FROM users WHERE date(created_at) = date('now')
        """,
    )

"""Loyalty points from the day's orders; SQL under the image's include folder."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="loyalty_points",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    template_searchpath="/usr/local/airflow/include",
    default_args={"retries": 1},
):
    SQLExecuteQueryOperator(
        task_id="add_points",
        conn_id="postgres_crm",
        sql="sql/add_loyalty_points.sql",
    )

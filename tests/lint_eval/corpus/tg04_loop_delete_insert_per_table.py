"""Rebuild each mart table's day from staging, one task per table generated in a loop."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

MART_TABLES = ["sessions", "pageviews", "conversions"]

with DAG(
    dag_id="web_marts_daily",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 2, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1},
):
    for table in MART_TABLES:
        SQLExecuteQueryOperator(
            task_id=f"rebuild_{table}",
            conn_id="postgres_dw",
            sql=f"""
                BEGIN;
                DELETE FROM mart.{table} WHERE event_date = '{{{{ ds }}}}';
                INSERT INTO mart.{table}
                SELECT * FROM staging.{table} WHERE event_date = '{{{{ ds }}}}';
                COMMIT;
            """,
        )

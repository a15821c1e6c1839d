"""Regional totals: one mapped task instance per region's statement (.expand(sql=...))."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

REGIONAL = [
    "INSERT INTO sales.regional_totals SELECT 'emea', '{{ ds }}', SUM(amount) FROM sales.emea "
    "WHERE sale_date = '{{ ds }}'",
    "INSERT INTO sales.regional_totals SELECT 'amer', '{{ ds }}', SUM(amount) FROM sales.amer "
    "WHERE sale_date = '{{ ds }}'",
    "INSERT INTO sales.regional_totals SELECT 'apac', '{{ ds }}', SUM(amount) FROM sales.apac "
    "WHERE sale_date = '{{ ds }}'",
]

with DAG(
    dag_id="regional_totals",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator.partial(task_id="regional_total", conn_id="postgres_dw").expand(sql=REGIONAL)

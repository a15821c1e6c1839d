"""Daily sales mart; queries are kept in a dict at the top of the file."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

SQL = {
    "stage": "TRUNCATE staging.sales; INSERT INTO staging.sales SELECT * FROM raw.pos_sales",
    "publish": """
        INSERT INTO mart.daily_sales (sale_date, store_id, revenue)
        SELECT sale_date, store_id, SUM(amount)
        FROM staging.sales
        WHERE sale_date = CURRENT_DATE - 1
        GROUP BY sale_date, store_id
    """,
}

with DAG(
    dag_id="daily_sales_mart",
    schedule="0 6 * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    stage = SQLExecuteQueryOperator(task_id="stage", conn_id="postgres_dw", sql=SQL["stage"])
    publish = SQLExecuteQueryOperator(task_id="publish", conn_id="postgres_dw", sql=SQL["publish"])
    stage >> publish

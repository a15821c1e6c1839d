"""Sales mart: one task rewrites the day, a second task patches regions into the same rows."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="sales_mart",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    rewrite = SQLExecuteQueryOperator(
        task_id="rewrite_sales",
        conn_id="postgres_dw",
        sql="""
            DELETE FROM mart.sales WHERE sale_date = '{{ ds }}';
            INSERT INTO mart.sales (sale_id, sale_date, store_id, amount)
            SELECT id, sale_date, store_id, amount FROM core.sales WHERE sale_date = '{{ ds }}';
        """,
    )
    patch = SQLExecuteQueryOperator(
        task_id="patch_regions",
        conn_id="postgres_dw",
        sql="""
            UPDATE mart.sales s SET region = st.region
            FROM core.stores st
            WHERE st.store_id = s.store_id AND s.sale_date = '{{ ds }}'
        """,
    )
    rewrite >> patch

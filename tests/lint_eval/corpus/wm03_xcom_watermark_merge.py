"""Product catalogue sync in Snowflake: one task reads the mark, the next merges past it."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.snowflake.hooks.snowflake import SnowflakeHook
from airflow.sdk import DAG, task

with DAG(
    dag_id="catalogue_sync",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):

    @task
    def get_watermark() -> str:
        row = SnowflakeHook().get_first("SELECT MAX(updated_at) FROM core.products")
        return row[0].isoformat()

    merge = SQLExecuteQueryOperator(
        task_id="merge_products",
        conn_id="snowflake_default",
        sql="""
            MERGE INTO core.products t
            USING (
                SELECT * FROM raw.products
                WHERE updated_at > '{{ ti.xcom_pull(task_ids="get_watermark") }}'
            ) s ON t.product_id = s.product_id
            WHEN MATCHED THEN UPDATE SET name = s.name, price = s.price, updated_at = s.updated_at
            WHEN NOT MATCHED THEN INSERT (product_id, name, price, updated_at)
                VALUES (s.product_id, s.name, s.price, s.updated_at)
        """,
    )
    get_watermark() >> merge

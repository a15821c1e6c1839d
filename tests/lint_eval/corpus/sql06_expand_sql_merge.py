"""Dimension refresh: mapped MERGE statements, one per dimension."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

MERGES = [
    """
    MERGE INTO dim.products t USING staging.products s ON t.product_id = s.product_id
    WHEN MATCHED THEN UPDATE SET name = s.name, price = s.price
    WHEN NOT MATCHED THEN INSERT (product_id, name, price) VALUES (s.product_id, s.name, s.price)
    """,
    """
    MERGE INTO dim.stores t USING staging.stores s ON t.store_id = s.store_id
    WHEN MATCHED THEN UPDATE SET city = s.city
    WHEN NOT MATCHED THEN INSERT (store_id, city) VALUES (s.store_id, s.city)
    """,
]

with DAG(
    dag_id="dimension_refresh",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    SQLExecuteQueryOperator.partial(task_id="merge_dimension", conn_id="snowflake_default").expand(
        sql=MERGES
    )

"""Price lists: one DAG empties the shared table at 07:00 while another DAG loads its prices into it
at the same hour; the two DAGs never see each other's rows (the truncate drops the other's load)."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="prices_north",
    schedule="0 7 * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(task_id="clear_prices", conn_id="postgres_dw", sql="TRUNCATE catalog.prices")

with DAG(
    dag_id="prices_south",
    schedule="0 7 * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="load_south_prices",
        conn_id="postgres_dw",
        sql="INSERT INTO catalog.prices (sku, price) SELECT sku, price FROM staging.south_prices",
    )

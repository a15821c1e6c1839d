"""Inventory snapshot: each task runs a list of statements."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="inventory_snapshot",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    snapshot = SQLExecuteQueryOperator(
        task_id="snapshot_stock",
        conn_id="postgres_dw",
        sql=[
            "DELETE FROM dw.stock_snapshot WHERE snapshot_date = '{{ ds }}'",
            "INSERT INTO dw.stock_snapshot SELECT '{{ ds }}', sku, qty FROM wms.stock",
        ],
    )
    movements = SQLExecuteQueryOperator(
        task_id="load_movements",
        conn_id="postgres_dw",
        sql=[
            "TRUNCATE staging.movements",
            "INSERT INTO staging.movements SELECT * FROM wms.movements WHERE moved_on = '{{ ds }}'",
            "INSERT INTO dw.stock_movements SELECT * FROM staging.movements",
        ],
    )
    snapshot >> movements

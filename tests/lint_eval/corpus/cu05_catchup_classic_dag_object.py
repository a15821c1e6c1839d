"""Six-hourly inventory sync in the classic style: dag = DAG(...), tasks take dag=dag."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

START = datetime(2022, 3, 1)

dag = DAG(
    "inventory_sync_6h",
    schedule=timedelta(hours=6),
    start_date=START,
    catchup=True,
    default_args={"owner": "ops", "retries": 1},
)

sync = SQLExecuteQueryOperator(
    task_id="sync_inventory",
    conn_id="postgres_wms",
    sql="""
        INSERT INTO wms.inventory_history (sku, qty, as_of)
        SELECT sku, qty, '{{ data_interval_end }}' FROM wms.inventory
        ON CONFLICT (sku, as_of) DO NOTHING
    """,
    dag=dag,
)

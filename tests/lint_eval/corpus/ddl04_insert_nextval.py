"""Shipment batches numbered from a sequence as they are copied in."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="shipment_batches",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="copy_shipments",
        conn_id="postgres_logistics",
        sql="""
            INSERT INTO logistics.shipment_batches (batch_id, carrier, shipped_on, parcels)
            SELECT nextval('logistics.batch_seq'), carrier, shipped_on, COUNT(*)
            FROM logistics.parcels
            WHERE shipped_on = '{{ ds }}'
            GROUP BY carrier, shipped_on
        """,
    )

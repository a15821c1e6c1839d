# Lint corpus: an upsert keyed on gen_random_uuid(): randomness
# expect: IDEM001@23
# expect-ack: none
"""A fresh UUID per row per run: the "key" changes on every rerun."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c24_shipments",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="load_shipments",
        conn_id="postgres_wh",
        sql="""
            INSERT INTO c24_shipments (shipment_key, order_id, shipped_on)
            SELECT gen_random_uuid(), order_id, shipped_on FROM raw_shipments
            WHERE shipped_on = '{{ ds }}'
            ON CONFLICT (shipment_key) DO NOTHING
        """,
    )

# Lint corpus: the window is CURRENT_DATE: reads the clock
# expect: IDEM001@22
# expect-ack: none
"""Yesterday's job that reads today's date: rerun late, it loads the wrong day."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c06_stock_snapshot",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="snapshot_stock",
        conn_id="warehouse",
        sql="""
            DELETE FROM c06_stock_snapshot WHERE snapshot_date = CURRENT_DATE;
            INSERT INTO c06_stock_snapshot (snapshot_date, sku, quantity)
            SELECT now(), sku, quantity FROM stock;
        """,
    )

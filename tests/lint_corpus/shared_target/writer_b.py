# Lint corpus: shared target, second writer (lint this folder as a whole)
# expect: IDEM007@19
# expect-ack: none
"""A "quick fix" DAG someone added that upserts late orders into the same table: the rollup's window
overwrite, in another DAG, deletes them again (round 36c: the writes overlap on the same rows)."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="shared_b_fixup",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="fix_orders",
        conn_id="warehouse",
        sql="INSERT INTO shared_orders (order_id, order_date) SELECT order_id, order_date FROM late_orders "
        "WHERE order_date = '{{ ds }}' ON CONFLICT (order_id) DO UPDATE SET order_date = EXCLUDED.order_date",
    )

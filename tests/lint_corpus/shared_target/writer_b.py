# Lint corpus: shared target, second writer (lint this folder as a whole)
# expect: IDEM007@18
# expect-ack: none
"""A "quick fix" DAG someone added that writes the same table."""

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
        sql="UPDATE shared_orders SET order_date = order_date WHERE order_date = '{{ ds }}'",
    )

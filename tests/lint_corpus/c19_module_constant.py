# Lint corpus: SQL built from module constants: an append
# expect: IDEM002@12
# expect-ack: none
"""The INSERT is assembled from two constants; the linter resolves them."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

TARGET = "INSERT INTO c19_refunds (refund_id, amount_eur, refund_date) "
SOURCE = "SELECT refund_id, amount_eur, refund_date FROM raw_refunds WHERE refund_date = '{{ ds }}'"
LOAD_REFUNDS = TARGET + SOURCE

with DAG(
    dag_id="c19_refunds",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    SQLExecuteQueryOperator(task_id="load_refunds", conn_id="warehouse", sql=LOAD_REFUNDS)

"""Append unseen transactions to the ledger, deduplicated with a LEFT JOIN ... IS NULL."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="ledger_dedup_append",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="append_unseen",
        conn_id="mysql_ledger",
        sql="""
            INSERT INTO ledger.transactions (tx_id, account_id, amount, booked_at)
            SELECT s.tx_id, s.account_id, s.amount, s.booked_at
            FROM ledger_staging.transactions s
            LEFT JOIN ledger.transactions t ON t.tx_id = s.tx_id
            WHERE t.tx_id IS NULL
              AND s.booked_at >= '{{ data_interval_start }}' AND s.booked_at < '{{ data_interval_end }}'
        """,
    )

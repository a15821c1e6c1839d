"""Refund claims: the NOT EXISTS filters rejected claims, not rows already loaded."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="refund_claims",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="load_claims",
        conn_id="postgres_dw",
        sql="""
            INSERT INTO claims.accepted (claim_id, order_id, amount, claimed_on)
            SELECT c.claim_id, c.order_id, c.amount, c.claimed_on
            FROM landing.claims c
            WHERE c.claimed_on = '{{ ds }}'
              AND NOT EXISTS (SELECT 1 FROM claims.rejected r WHERE r.claim_id = c.claim_id)
        """,
    )

# Lint corpus: UPDATE .. SET total = total + ..: a running total
# expect: IDEM008@22
# expect-ack: none
"""Loyalty points added to a running total: a rerun adds them again."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c20_loyalty",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="add_points",
        conn_id="warehouse",
        sql="""
            UPDATE c20_loyalty_accounts
            SET points = points + (SELECT COALESCE(SUM(p.points), 0) FROM purchases p
                                   WHERE p.customer_id = c20_loyalty_accounts.customer_id
                                   AND p.purchase_date = '{{ ds }}')
        """,
    )

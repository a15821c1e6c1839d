"""Monthly spend per merchant, topped up from each day's card transactions."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="merchant_monthly_spend",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="top_up_month",
        conn_id="postgres_cards",
        sql="""
            INSERT INTO cards.merchant_month AS m (merchant_id, month, spend)
            SELECT merchant_id, date_trunc('month', '{{ ds }}'::date), SUM(amount)
            FROM cards.transactions
            WHERE tx_date = '{{ ds }}'
            GROUP BY merchant_id
            ON CONFLICT (merchant_id, month) DO UPDATE SET spend = m.spend + EXCLUDED.spend
        """,
    )

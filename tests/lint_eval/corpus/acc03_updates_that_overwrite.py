"""Account balances and statuses set from the day's snapshot (no running totals)."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="account_state",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    balances = SQLExecuteQueryOperator(
        task_id="set_balances",
        conn_id="postgres_bank",
        sql="""
            UPDATE bank.accounts a
            SET balance = s.closing_balance, balance_date = s.snapshot_date
            FROM bank.balance_snapshots s
            WHERE s.account_id = a.account_id AND s.snapshot_date = '{{ ds }}'
        """,
    )
    dormant = SQLExecuteQueryOperator(
        task_id="flag_dormant",
        conn_id="postgres_bank",
        sql="""
            UPDATE bank.account_flags f
            SET dormant = true, days_inactive = ('{{ ds }}'::date - f.last_activity_date)
            WHERE f.last_activity_date < '{{ ds }}'::date - 365
        """,
    )
    balances >> dormant

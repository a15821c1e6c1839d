"""Explicit catchup over a task that takes yesterday from the clock, not from its run."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="ticket_rollup_daily",
    schedule="@daily",
    start_date=pendulum.datetime(2023, 1, 1, tz="UTC"),
    catchup=True,
):
    SQLExecuteQueryOperator(
        task_id="rollup_tickets",
        conn_id="support_db",
        sql="""
            DELETE FROM support.ticket_daily WHERE day = CURRENT_DATE - 1;
            INSERT INTO support.ticket_daily (day, opened)
            SELECT CURRENT_DATE - 1, COUNT(*) FROM support.tickets
            WHERE CAST(opened_at AS DATE) = CURRENT_DATE - 1
        """,
    )

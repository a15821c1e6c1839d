# Lint corpus: one task deletes the day, another inserts it
# expect: none
# expect-ack: none
"""Delete and insert split over two tasks: information (issue 35), a rerun of the insert alone appends."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c16_split_write",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    clear = SQLExecuteQueryOperator(
        task_id="clear_day",
        conn_id="warehouse",
        sql="DELETE FROM c16_sessions WHERE session_date = '{{ ds }}'",
    )
    load = SQLExecuteQueryOperator(
        task_id="load_day",
        conn_id="warehouse",
        sql="INSERT INTO c16_sessions SELECT * FROM raw_sessions WHERE session_date = '{{ ds }}'",
    )
    clear >> load

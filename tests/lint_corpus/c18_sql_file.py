# Lint corpus: SQL in a .sql file next to the DAG reads CURRENT_DATE
# expect: IDEM001@sql/c18_daily_margin.sql:6
# expect-ack: none
"""The SQL lives in sql/c18_daily_margin.sql; the linter follows it."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c18_daily_margin",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(task_id="margin", conn_id="warehouse", sql="sql/c18_daily_margin.sql")

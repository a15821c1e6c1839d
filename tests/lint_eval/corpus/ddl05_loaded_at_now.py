"""Daily balances snapshot; the statement stamps each row with its load time."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

SNAPSHOT = """
DELETE FROM finance.balance_snapshot WHERE snapshot_date = '{{ ds }}';
INSERT INTO finance.balance_snapshot (snapshot_date, account_id, balance, loaded_at)
SELECT '{{ ds }}', account_id, balance, now()
FROM finance.accounts;
"""

with DAG(
    dag_id="balance_snapshot",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    SQLExecuteQueryOperator(task_id="snapshot_balances", conn_id="postgres_finance", sql=SNAPSHOT)

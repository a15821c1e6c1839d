# Lint corpus: no catchup= on an Airflow 2 DAG, one run at a time: throttled, not bounded
# expect: IDEM005@15
# expect-ack: none
"""c37's default catchup with max_active_runs=1 (round 19: Mozilla's experiments_live, every 5
minutes since 2021, ~520,000 runs): one window at a time throttles a backlog nobody asked for but
never bounds it. An explicit catchup=True with max_active_runs=1 stays exempt (a chosen backfill)."""

from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG(
    dag_id="c38_live_export",
    schedule_interval="*/5 * * * *",
    start_date=datetime(2021, 1, 1),
    max_active_runs=1,
) as dag:
    SQLExecuteQueryOperator(
        task_id="export_live",
        conn_id="warehouse",
        sql="DELETE FROM c38_live_counts; "
        "INSERT INTO c38_live_counts SELECT branch, COUNT(*) FROM live_enrollments GROUP BY branch",
    )

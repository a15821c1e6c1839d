# Lint corpus: an append acknowledged inline (an audit log)
# expect: none
# expect-ack: IDEM002@22
"""An audit log: one row per attempt is the point, so the append is acknowledged."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c17_audit",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="log_attempt",
        conn_id="warehouse",
        # idempotent: ack IDEM002 audit log: one row per attempt is the point
        sql="INSERT INTO c17_audit_log (run_id, day) VALUES ('{{ run_id }}', '{{ ds }}')",
    )

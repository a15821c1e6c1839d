"""Delete the run's interval and insert it again, in one task and one transaction."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

REWRITE = """
BEGIN;
DELETE FROM analytics.app_events
WHERE event_ts >= '{{ data_interval_start }}' AND event_ts < '{{ data_interval_end }}';
INSERT INTO analytics.app_events (event_id, user_id, event_ts, name)
SELECT event_id, user_id, event_ts, name
FROM raw.app_events
WHERE event_ts >= '{{ data_interval_start }}' AND event_ts < '{{ data_interval_end }}';
COMMIT;
"""

with DAG(
    dag_id="app_events_hourly",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    SQLExecuteQueryOperator(task_id="rewrite_hour", conn_id="postgres_dw", sql=REWRITE)

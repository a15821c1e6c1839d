"""Rolling seven-day active users, rebuilt every morning in Snowflake."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="rolling_active_users",
    schedule="0 6 * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="rebuild_last_7_days",
        conn_id="snowflake_default",
        sql=[
            "DELETE FROM analytics.daily_active_users WHERE activity_date >= DATEADD(day, -7, CURRENT_DATE())",
            """
            INSERT INTO analytics.daily_active_users (activity_date, users)
            SELECT DATE(event_ts), COUNT(DISTINCT user_id)
            FROM raw.app_events
            WHERE event_ts >= DATEADD(day, -7, CURRENT_DATE())
            GROUP BY 1
            """,
        ],
    )

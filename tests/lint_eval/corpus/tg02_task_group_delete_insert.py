"""Marketing spend per channel: each channel's task group rewrites its own day."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG, task_group

with DAG(
    dag_id="marketing_spend_daily",
    schedule="0 4 * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
) as dag:

    @task_group(group_id="google_ads")
    def google_ads():
        SQLExecuteQueryOperator(
            task_id="rewrite_day",
            conn_id="snowflake_default",
            sql=[
                "DELETE FROM marts.spend_google WHERE spend_date = '{{ ds }}'",
                """
                INSERT INTO marts.spend_google (spend_date, campaign_id, cost_micros)
                SELECT segments_date, campaign_id, SUM(cost_micros)
                FROM raw.google_ads_campaign_stats
                WHERE segments_date = '{{ ds }}'
                GROUP BY 1, 2
                """,
            ],
        )

    google_ads()

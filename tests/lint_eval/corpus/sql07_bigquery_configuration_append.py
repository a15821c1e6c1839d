"""GA4 daily events rolled up in BigQuery with BigQueryInsertJobOperator."""

from __future__ import annotations

import pendulum
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.sdk import DAG

ROLLUP = """
INSERT INTO `acme-analytics.reporting.ga4_daily` (event_date, event_name, users)
SELECT PARSE_DATE('%Y%m%d', event_date), event_name, COUNT(DISTINCT user_pseudo_id)
FROM `acme-analytics.analytics_123456.events_*`
WHERE _TABLE_SUFFIX = FORMAT_DATE('%Y%m%d', DATE_SUB(CURRENT_DATE(), INTERVAL 1 DAY))
GROUP BY 1, 2
"""

with DAG(
    dag_id="ga4_daily_rollup",
    schedule="0 7 * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    BigQueryInsertJobOperator(
        task_id="rollup_events",
        gcp_conn_id="google_cloud_default",
        location="EU",
        configuration={"query": {"query": ROLLUP, "useLegacySql": False}},
    )

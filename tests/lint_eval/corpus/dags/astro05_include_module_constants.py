"""Campaign touches; the SQL is imported from the project's include package."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

from include.queries import LOAD_TOUCHES, REFRESH_CAMPAIGNS

with DAG(
    dag_id="campaign_touches",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    campaigns = SQLExecuteQueryOperator(task_id="refresh_campaigns", conn_id="postgres_mkt", sql=REFRESH_CAMPAIGNS)
    touches = SQLExecuteQueryOperator(task_id="load_touches", conn_id="postgres_mkt", sql=LOAD_TOUCHES)
    campaigns >> touches

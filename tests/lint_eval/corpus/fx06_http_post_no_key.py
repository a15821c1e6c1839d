"""Notify the CRM that the day's segments are ready; the POST is retried without a key."""

from __future__ import annotations

import json

import pendulum
from airflow.providers.http.operators.http import HttpOperator
from airflow.sdk import DAG

with DAG(
    dag_id="crm_segments_ready",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 5, "retry_exponential_backoff": True},
):
    HttpOperator(
        task_id="notify_crm",
        http_conn_id="crm_api",
        endpoint="/api/v2/segment-imports",
        method="POST",
        data=json.dumps({"date": "{{ ds }}", "source": "warehouse"}),
        headers={"Content-Type": "application/json"},
    )

"""Data quality alerts: one Slack operator without retries, one hand-rolled webhook call with them."""

from __future__ import annotations

import pendulum
import requests
from airflow.providers.slack.operators.slack_webhook import SlackWebhookOperator
from airflow.sdk import DAG, task

with DAG(
    dag_id="dq_alerts",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    announce = SlackWebhookOperator(
        task_id="announce_start",
        slack_webhook_conn_id="slack_dq",
        message="DQ checks for {{ ds }} started",
        retries=0,
    )

    @task(retries=2)
    def page_on_failures(ds=None) -> None:
        failures = ["orders.amount_null_rate"]
        if failures:
            requests.post(
                "https://hooks.slack.example/services/T000/B000/XXXX",
                json={"text": f"DQ failures for {ds}: {', '.join(failures)}"},
                timeout=10,
            )

    announce >> page_on_failures()

# Lint corpus: retried Slack webhook acknowledged on the task's line
# expect: none
# expect-ack: IDEM006@20
"""A Slack ping that may repeat: acknowledged above the task."""

from __future__ import annotations

import pendulum
from airflow.providers.slack.operators.slack_webhook import SlackWebhookOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c32_pings",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1},
):
    # idempotent: ack IDEM006 a duplicate "done" ping in #data is harmless
    SlackWebhookOperator(
        task_id="ping",
        slack_webhook_conn_id="slack",
        message="Loaded {{ ds }}",
    )

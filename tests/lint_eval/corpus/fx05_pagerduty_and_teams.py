"""Escalate SLA misses to PagerDuty and post them to the Teams channel."""

from __future__ import annotations

import pendulum
from airflow.providers.microsoft.azure.operators.msgraph import MSGraphAsyncOperator
from airflow.providers.pagerduty.notifications.pagerduty import send_pagerduty_notification
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def escalate(**context):
    send_pagerduty_notification(
        summary=f"SLA missed for {context['ds']}",
        severity="error",
        source="airflow",
        pagerduty_events_conn_id="pagerduty_default",
    ).notify(context)


with DAG(
    dag_id="sla_escalation",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    page = PythonOperator(task_id="page_on_call", python_callable=escalate, retries=0)
    teams = MSGraphAsyncOperator(
        task_id="post_to_teams",
        conn_id="msgraph_default",
        url="teams/{team_id}/channels/{channel_id}/messages",
        path_parameters={"team_id": "T-ops", "channel_id": "C-sla"},
        method="POST",
        data={"body": {"content": "SLA missed for {{ ds }}"}},
        retries=3,
    )
    page >> teams

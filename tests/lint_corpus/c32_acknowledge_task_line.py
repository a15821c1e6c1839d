# Lint corpus: retried partner webhook acknowledged on the task's line
# expect: none
# expect-ack: IDEM006@23
"""A partner ping that may repeat: acknowledged above the task. (A Slack post is information since
round 11, a chat notice; this ping goes to a partner's webhook, which counts each call, and its
endpoint names the send: a defect since round 36c, an HTTP call whose URL names nothing being only
information.)"""

from __future__ import annotations

import pendulum
from airflow.providers.http.operators.http import HttpOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c32_pings",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1},
):
    # idempotent: ack IDEM006 the partner counts a duplicate "done" ping once per day
    HttpOperator(
        task_id="ping",
        http_conn_id="partner",
        endpoint="/notifications/send",
        data="Loaded {{ ds }}",
    )

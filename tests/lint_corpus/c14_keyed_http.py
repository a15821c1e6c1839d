# Lint corpus: HTTP POST with an Idempotency-Key header: keyed
# expect: none
# expect-ack: none
"""Posting the day's settlement with an idempotency key: the receiver drops a repeat."""

from __future__ import annotations

import pendulum
from airflow.providers.http.operators.http import HttpOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c14_settlement",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 4},
):
    HttpOperator(
        task_id="post_settlement",
        http_conn_id="bank",
        endpoint="/settlements",
        method="POST",
        headers={"Idempotency-Key": "settlement-{{ ds }}"},
        data='{"day": "{{ ds }}"}',
    )

"""Push the day's payouts to the payment provider; the request carries an idempotency key."""

from __future__ import annotations

import pendulum
from airflow.providers.http.operators.http import HttpOperator
from airflow.sdk import DAG

with DAG(
    dag_id="payout_push",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 4},
):
    status = HttpOperator(
        task_id="check_api",
        http_conn_id="payments_api",
        endpoint="/v1/health",
        method="GET",
    )
    push = HttpOperator(
        task_id="push_payouts",
        http_conn_id="payments_api",
        endpoint="/v1/payout_batches",
        method="POST",
        headers={"Idempotency-Key": "payouts-{{ ds }}", "Content-Type": "application/json"},
        data='{"batch_date": "{{ ds }}"}',
    )
    status >> push

"""Replenishment: orders are placed at the supplier's API and one e-mail per shortage opens a ticket;
both are retried without a key (a retry places the orders again and opens every ticket twice)."""

from __future__ import annotations

import json

import pendulum
from airflow.providers.http.operators.http import HttpOperator
from airflow.sdk import DAG, task
from airflow.utils.email import send_email

with DAG(
    dag_id="replenishment",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    HttpOperator(
        task_id="place_supplier_orders",
        http_conn_id="supplier_api",
        endpoint="/v1/purchase-orders/create",
        method="POST",
        data=json.dumps({"date": "{{ ds }}"}),
    )

    @task
    def open_shortage_tickets(shortages: list[dict[str, str]]) -> None:
        for item in shortages:
            send_email(to="servicedesk@example.com", subject=f"Shortage {item['sku']}", html_content="")

    open_shortage_tickets([])

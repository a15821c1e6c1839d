# Lint corpus: requests.post in a retried task, no key
# expect: IDEM006@15
# expect-ack: none
"""Create a ticket per failed window, retried twice, with no key: duplicate tickets."""

from __future__ import annotations

import pendulum
import requests
from airflow.sdk import DAG, task


@task(retries=2)
def open_ticket(ds: str | None = None) -> None:
    requests.post(
        "https://tickets.example.com/api/tickets",
        json={"title": f"Reconcile payouts for {ds}"},
        timeout=10,
    )


with DAG(
    dag_id="c15_tickets",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    open_ticket()

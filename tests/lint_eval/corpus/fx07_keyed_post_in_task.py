"""Create the day's invoice batch at the billing provider; the key makes a retried POST a no-op."""

from __future__ import annotations

import pendulum
import requests
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def invoice_batches():
    @task(retries=4)
    def create_batch(ds=None, dag_run=None) -> str:
        resp = requests.post(
            "https://billing.example.com/v1/invoice_batches",
            json={"period": ds},
            headers={"Idempotency-Key": f"invoice-batch-{ds}"},
            timeout=30,
        )
        resp.raise_for_status()
        return resp.json()["id"]

    create_batch()


invoice_batches()

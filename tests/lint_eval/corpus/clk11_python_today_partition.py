"""Pull the day's weather observations from the API into the lake."""

from __future__ import annotations

import json
from datetime import date

import pendulum
import requests
from airflow.providers.amazon.aws.hooks.s3 import S3Hook
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def weather_observations():
    @task(retries=3)
    def fetch_observations() -> None:
        day = date.today().isoformat()
        resp = requests.get("https://api.weather.example/v1/observations", params={"date": day}, timeout=30)
        resp.raise_for_status()
        S3Hook(aws_conn_id="aws_lake").load_string(
            json.dumps(resp.json()),
            key=f"weather/dt={day}/observations.json",
            bucket_name="acme-lake",
            replace=True,
        )

    fetch_observations()


weather_observations()

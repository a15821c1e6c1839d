"""Half-edited DAG: a function definition lost its colon."""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def orders_cleanup():
    @task
    def purge_staging(ds=None)
        print(f"purging staging for {ds}")

    purge_staging()


orders_cleanup()

"""DAG edited with two editors: the task body mixes a tab and spaces."""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def tab_indented():
    @task
    def report(ds=None) -> str:
        message = f"report for {ds}"
	return message

    report()


tab_indented()

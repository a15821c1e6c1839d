# Lint corpus: catchup=True on a cron schedule since 2024, no end_date, a window operator: information
# expect: none
# expect-ack: none
"""A cron schedule with catchup and no end: a chosen backlog of hourly merges, each of its own hour."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import MergeOperator

START = pendulum.datetime(2024, 6, 1, tz="UTC")

with DAG(
    dag_id="c33_hourly_merge",
    schedule="15 * * * *",
    start_date=START,
    catchup=True,
    max_active_runs=4,
):
    MergeOperator(
        task_id="merge_hour",
        table="c33_hourly",
        key_columns=["hour"],
        granularity="hour",
        sql="SELECT hour, SUM(n) AS n FROM raw_hits WHERE hour >= :window_start AND hour < :window_end "
        "GROUP BY hour",
    )

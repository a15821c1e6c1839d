"""A test DAG for the run history: a plain @task that fails on its first try and succeeds on the
second (a marker file remembers the first try), beside a window write."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="flaky_history",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
    catchup=False,
    params={"policy_version": "v1"},
):

    @task(retries=1, retry_delay=timedelta(seconds=0))
    def flaky() -> str:
        """Fails once (no marker yet), then succeeds: what a transient outage looks like."""
        marker = Path(os.environ["FLAKY_HISTORY_MARKER"])
        if not marker.exists():
            marker.write_text("first try failed\n")
            raise RuntimeError("transient: upstream API answered 503")
        return "ok"

    write = PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="warehouse",
        table="payouts",
        partition_column="sale_date",
        granularity="day",
        key_columns=["sale_id"],
        sql=(
            "SELECT s.sale_id, s.sale_date, ROUND(s.price_eur * 0.60, 2) AS amount_eur, 0.60 AS rate "
            "FROM sales s WHERE s.sale_date >= :window_start AND s.sale_date < :window_end"
        ),
    )
    flaky() >> write

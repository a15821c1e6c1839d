# Lint corpus: PartitionOverwriteOperator, day windows: idempotent
# expect: none
# expect-ack: none
"""Daily revenue by partition overwrite: rerunning a day rewrites only that day."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="c01_revenue_overwrite",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    PartitionOverwriteOperator(
        task_id="write_revenue",
        conn_id="warehouse",
        table="c01_daily_revenue",
        partition_column="sale_date",
        granularity="day",
        sql=(
            "SELECT s.sale_date, SUM(s.price_eur) AS revenue_eur FROM sales s "
            "WHERE s.sale_date >= :window_start AND s.sale_date < :window_end GROUP BY s.sale_date"
        ),
    )

"""A test DAG taking the window through templates ({{ window_start }}) instead of bound parameters."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="payouts_templated",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
    catchup=False,
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="warehouse",
        table="payouts",
        partition_column="sale_date",
        granularity="day",
        sql=(
            "SELECT s.sale_id, s.sale_date, ROUND(s.price_eur * 0.60, 2) AS amount_eur, 0.60 AS rate "
            "FROM sales s WHERE s.sale_date >= '{{ window_start }}' AND s.sale_date < '{{ window_end }}'"
        ),
    )

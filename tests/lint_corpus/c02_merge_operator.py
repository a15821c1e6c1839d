# Lint corpus: MergeOperator on a key: idempotent
# expect: none
# expect-ack: none
"""Payouts merged on sale_id: a rerun updates the same keys and inserts none twice."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import MergeOperator

PAYOUTS = (
    "SELECT s.sale_id, s.sale_date, ROUND(s.price_eur * 0.60, 2) AS amount_eur, 0.60 AS rate "
    "FROM sales s WHERE s.sale_date >= :window_start AND s.sale_date < :window_end"
)

with DAG(
    dag_id="c02_payouts_merge",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    MergeOperator(
        task_id="merge_payouts",
        table="c02_payouts",
        key_columns=["sale_id"],
        partition_column="sale_date",
        delete_missing=True,
        sql=PAYOUTS,
        granularity="day",
    )

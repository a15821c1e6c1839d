"""Daily attribution model, written when catchup was still the default."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import MergeOperator

with DAG(
    dag_id="attribution_daily",
    schedule="@daily",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=True,
    default_args={"retries": 2},
):
    MergeOperator(
        task_id="merge_attribution",
        conn_id="warehouse",
        table="attribution",
        key_columns=["order_id"],
        partition_column="order_date",
        granularity="day",
        sql=(
            "SELECT o.order_id, o.order_date, c.channel FROM orders o JOIN touches c ON c.order_id = o.order_id "
            "WHERE o.order_date >= :window_start AND o.order_date < :window_end"
        ),
    )

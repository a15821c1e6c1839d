"""Subscriptions merged on their key; keys gone from the source are removed from the window."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import MergeOperator

SUBSCRIPTIONS = (
    "SELECT s.subscription_id, s.started_on, s.plan, s.mrr_eur FROM subscriptions s "
    "WHERE s.started_on >= :window_start AND s.started_on < :window_end"
)

with DAG(
    dag_id="subscriptions_merge",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    MergeOperator(
        task_id="merge_subscriptions",
        conn_id="warehouse",
        table="subscriptions_daily",
        key_columns=["subscription_id"],
        partition_column="started_on",
        delete_missing=True,
        granularity="day",
        sql=SUBSCRIPTIONS,
    )

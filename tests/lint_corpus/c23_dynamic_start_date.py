# Lint corpus: start_date = datetime.now() - timedelta(days=1)
# expect: IDEM003@17
# expect-ack: none
"""The classic dynamic start_date: it moves every time the file is parsed."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_idempotent.operators import MergeOperator

with DAG(
    dag_id="c23_moving_start",
    schedule="@daily",
    start_date=datetime.now() - timedelta(days=1),
    catchup=False,
):
    MergeOperator(
        task_id="merge_users",
        table="c23_users",
        key_columns=["user_id"],
        granularity="day",
        sql="SELECT user_id, email FROM raw_users "
        "WHERE updated_at >= :window_start AND updated_at < :window_end",
    )

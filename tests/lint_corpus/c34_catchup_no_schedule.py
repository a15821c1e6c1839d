# Lint corpus: catchup=True with schedule=None: no windows to create
# expect: none
# expect-ack: none
"""Manually triggered only: catchup has nothing to create."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="c34_manual",
    schedule=None,
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=True,
):
    PartitionOverwriteOperator(
        task_id="write_day",
        table="c34_manual_days",
        partition_column="day",
        granularity="day",
        sql="SELECT day, COUNT(*) AS n FROM raw_days WHERE day >= :window_start AND day < :window_end "
        "GROUP BY day",
    )

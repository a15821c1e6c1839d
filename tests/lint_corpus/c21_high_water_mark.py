# Lint corpus: the window is MAX(ts) of the target: a high-water mark
# expect: IDEM004@22
# expect-ack: none
"""Incremental load from the target's own high-water mark."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c21_incremental",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="load_new_events",
        conn_id="warehouse",
        sql="""
            INSERT INTO c21_events (event_id, ts, payload)
            SELECT event_id, ts, payload FROM raw_events
            WHERE ts > (SELECT MAX(ts) FROM c21_events)
        """,
    )

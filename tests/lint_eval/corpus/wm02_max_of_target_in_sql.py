"""Append new events past the newest one already loaded (high-water mark in the statement)."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="events_incremental",
    schedule="*/15 * * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
):
    SQLExecuteQueryOperator(
        task_id="load_new_events",
        conn_id="postgres_dw",
        sql="""
            INSERT INTO dw.events (event_id, user_id, kind, loaded_at)
            SELECT event_id, user_id, kind, loaded_at
            FROM staging.events
            WHERE loaded_at > (SELECT COALESCE(MAX(loaded_at), '1970-01-01') FROM dw.events)
        """,
    )

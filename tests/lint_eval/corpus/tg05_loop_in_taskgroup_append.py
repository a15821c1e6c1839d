"""Clickstream ingestion: one append task per source inside a TaskGroup."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG, TaskGroup

SOURCES = ("web", "app")

with DAG(
    dag_id="clickstream_ingest",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 4, 1, tz="UTC"),
    catchup=False,
):
    with TaskGroup("ingest"):
        for source in SOURCES:
            SQLExecuteQueryOperator(
                task_id=f"append_{source}",
                conn_id="postgres_events",
                sql=f"""
                    INSERT INTO events.clicks_{source} (event_id, user_id, url, ts)
                    SELECT event_id, user_id, url, ts
                    FROM landing.clicks_{source}
                    WHERE ts >= '{{{{ data_interval_start }}}}' AND ts < '{{{{ data_interval_end }}}}'
                """,
            )

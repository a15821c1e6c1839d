# Lint corpus: "the last 24 hours" before NOW(): relative window
# expect: IDEM004@24
# expect-ack: none
"""Events of "the last 24 hours": a rerun tomorrow reads another 24 hours."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c07_event_counts",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="count_events",
        conn_id="warehouse",
        sql="""
            INSERT INTO c07_event_counts (kind, events)
            SELECT kind, COUNT(*) FROM events
            WHERE created_at >= NOW() - INTERVAL '24 hours'
            GROUP BY kind
            ON CONFLICT (kind) DO UPDATE SET events = excluded.events
        """,
    )

"""Sync recently changed tickets into the support mart every 30 minutes."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

SYNC_TICKETS = """
INSERT INTO support.tickets (ticket_id, status, priority, updated_at)
SELECT id, status, priority, updated_at
FROM zendesk.tickets
WHERE updated_at > now() - interval '1 hour'
ON CONFLICT (ticket_id) DO UPDATE
SET status = EXCLUDED.status, priority = EXCLUDED.priority, updated_at = EXCLUDED.updated_at
"""

with DAG(
    dag_id="support_tickets_sync",
    schedule="*/30 * * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
):
    SQLExecuteQueryOperator(task_id="sync_tickets", conn_id="postgres_support", sql=SYNC_TICKETS)

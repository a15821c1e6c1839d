"""Build the QA sample of yesterday's support conversations."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

SAMPLE = """
CREATE OR REPLACE TABLE qa.conversation_sample_{{ ds_nodash }} AS
SELECT conversation_id, agent_id, channel
FROM support.conversations
WHERE closed_on = '{{ ds }}'
  AND random() < 0.02
"""

with DAG(
    dag_id="support_qa_sample",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(task_id="draw_sample", conn_id="duckdb_qa", sql=SAMPLE)

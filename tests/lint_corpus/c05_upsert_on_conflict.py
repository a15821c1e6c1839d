# Lint corpus: INSERT .. ON CONFLICT (key) DO UPDATE: idempotent
# expect: none
# expect-ack: none
"""Customers upserted on customer_id, window from the data interval."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

UPSERT = """
INSERT INTO c05_customers (customer_id, name, updated_at)
SELECT customer_id, name, updated_at FROM crm_customers
WHERE updated_at >= '{{ data_interval_start }}' AND updated_at < '{{ data_interval_end }}'
ON CONFLICT (customer_id) DO UPDATE SET name = excluded.name, updated_at = excluded.updated_at
"""

with DAG(
    dag_id="c05_customers_upsert",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 5},
):
    SQLExecuteQueryOperator(task_id="upsert_customers", conn_id="postgres_wh", sql=UPSERT)

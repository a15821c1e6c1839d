"""New customers only: the insert skips every key the dimension already has."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

INSERT_NEW = """
INSERT INTO dw.dim_customer (customer_id, email, first_seen)
SELECT s.customer_id, s.email, s.signup_date
FROM staging.customers s
WHERE NOT EXISTS (
    SELECT 1 FROM dw.dim_customer d WHERE d.customer_id = s.customer_id
)
"""

with DAG(
    dag_id="dim_customer_inserts",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    SQLExecuteQueryOperator(task_id="insert_new_customers", conn_id="postgres_dw", sql=INSERT_NEW)

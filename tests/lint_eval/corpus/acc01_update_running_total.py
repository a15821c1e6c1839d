"""Customer lifetime value, incremented by each day's orders."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

ADD_DAY = """
UPDATE crm.customer_value cv
SET lifetime_revenue = cv.lifetime_revenue + d.revenue,
    orders_count = cv.orders_count + d.orders
FROM (
    SELECT customer_id, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM core.orders
    WHERE order_date = '{{ ds }}'
    GROUP BY customer_id
) d
WHERE cv.customer_id = d.customer_id
"""

with DAG(
    dag_id="customer_value",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    SQLExecuteQueryOperator(task_id="add_day_to_ltv", conn_id="postgres_crm", sql=ADD_DAY)

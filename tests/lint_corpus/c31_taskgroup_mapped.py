# Lint corpus: TaskGroup + mapped MERGE statements: idempotent
# expect: none
# expect-ack: none
"""One MERGE per region, mapped inside a task group."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, TaskGroup

MERGE_SALES = """
MERGE INTO c31_region_sales t
USING (SELECT region, SUM(amount) AS amount FROM sales WHERE sale_date = '{{ ds }}' GROUP BY region) s
ON t.region = s.region AND t.sale_date = '{{ ds }}'
WHEN MATCHED THEN UPDATE SET amount = s.amount
WHEN NOT MATCHED THEN INSERT (region, sale_date, amount) VALUES (s.region, '{{ ds }}', s.amount)
"""

with DAG(
    dag_id="c31_regions",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    start = EmptyOperator(task_id="start")
    with TaskGroup(group_id="regions") as regions:
        SQLExecuteQueryOperator.partial(task_id="merge_region", conn_id="warehouse", sql=MERGE_SALES).expand(
            parameters=[{"region": "eu"}, {"region": "us"}]
        )
    start >> regions

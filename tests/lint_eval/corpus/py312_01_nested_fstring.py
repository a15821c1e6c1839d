"""Orders load with column lists spliced by nested same-quote f-strings (Python 3.12)."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

TABLE = "analytics.order_lines"
COLUMNS = ["order_id", "line_no", "sku", "qty", "price"]

LOAD = (
    f"INSERT INTO {TABLE} ({", ".join(COLUMNS)}) "
    f"SELECT {", ".join(f"l.{c}" for c in COLUMNS)} FROM landing.order_lines l "
    "WHERE l.order_date = '{{ ds }}'"
)

with DAG(
    dag_id="order_lines_load",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(task_id="load_order_lines", conn_id="postgres_dw", sql=LOAD)

"""Daily margin by partition overwrite, with a 3.12-only f-string in the doc rendering."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

METRICS = {"revenue": "SUM(l.price * l.qty)", "cost": "SUM(l.cost * l.qty)"}
DOC = f"Metrics: {", ".join(f"`{name}`" for name in METRICS)}"

with DAG(
    dag_id="daily_margin",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    doc_md=DOC,
    default_args={"retries": 2},
):
    PartitionOverwriteOperator(
        task_id="write_margin",
        conn_id="warehouse",
        table="daily_margin",
        partition_column="sale_date",
        granularity="day",
        sql=(
            f"SELECT l.sale_date, {METRICS['revenue']} AS revenue, {METRICS['cost']} AS cost "
            "FROM order_lines l WHERE l.sale_date >= :window_start AND l.sale_date < :window_end "
            "GROUP BY l.sale_date"
        ),
    )

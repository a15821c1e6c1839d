"""Copy yesterday's export of each table into raw: one task per table, built by a factory."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG


def make_copy_task(table: str) -> SQLExecuteQueryOperator:
    """One loader per exported table."""
    return SQLExecuteQueryOperator(
        task_id=f"copy_{table}",
        conn_id="redshift_dw",
        sql=f"""
            INSERT INTO raw.{table}
            SELECT * FROM export.{table}_{{{{ ds_nodash }}}}
        """,
    )


with DAG(
    dag_id="erp_copy_tables",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 3, 1, tz="UTC"),
    catchup=False,
    tags=["erp"],
):
    invoices = make_copy_task("invoices")
    payments = make_copy_task("payments")
    invoices >> payments

"""Manual re-export of one day's invoices; the trigger form proposes today's date."""

from __future__ import annotations

import datetime

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG, Param

with DAG(
    dag_id="invoice_reexport",
    schedule=None,
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "day": Param(
            f"{datetime.date.today()}",
            type="string",
            format="date",
            title="Day to re-export",
        ),
        "dry_run": Param(False, type="boolean"),
    },
):
    SQLExecuteQueryOperator(
        task_id="reexport_invoices",
        conn_id="postgres_billing",
        sql="""
            DELETE FROM billing.invoice_export WHERE invoice_date = '{{ params.day }}';
            INSERT INTO billing.invoice_export
            SELECT * FROM billing.invoices WHERE invoice_date = '{{ params.day }}';
        """,
    )

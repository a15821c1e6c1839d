"""Partner report e-mail; start_date in default_args, relative to now."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

default_args = {
    "owner": "bi",
    "start_date": datetime.now() - timedelta(days=1),
    "retries": 0,
}

with DAG(
    dag_id="partner_kpis",
    default_args=default_args,
    schedule="0 8 * * *",
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="refresh_kpis",
        conn_id="postgres_bi",
        sql="""
            INSERT INTO bi.partner_kpis (partner_id, kpi_date, orders)
            SELECT partner_id, '{{ ds }}', COUNT(*) FROM core.orders WHERE order_date = '{{ ds }}'
            GROUP BY partner_id
            ON CONFLICT (partner_id, kpi_date) DO UPDATE SET orders = EXCLUDED.orders
        """,
    )

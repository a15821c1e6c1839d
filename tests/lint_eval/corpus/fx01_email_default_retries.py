"""Send the finance team the daily close report."""

from __future__ import annotations

import pendulum
from airflow.providers.smtp.operators.smtp import EmailOperator
from airflow.sdk import DAG

with DAG(
    dag_id="daily_close_report",
    schedule="0 6 * * 1-5",
    start_date=pendulum.datetime(2025, 1, 1, tz="Europe/Paris"),
    catchup=False,
    default_args={"retries": 3, "retry_delay": pendulum.duration(minutes=10)},
):
    EmailOperator(
        task_id="email_close_report",
        conn_id="smtp_default",
        to=["finance@acme.example"],
        subject="Daily close {{ ds }}",
        html_content="<p>The close report for {{ ds }} is in the BI portal.</p>",
    )

# Lint corpus: EmailOperator retried three times, no key
# expect: none
# expect-ack: none
"""A report email, retried: every retry after a sent-but-failed attempt mails again. Information since
round 36c (issue 35): a notice to the team, a second copy changes no data; a send that creates
something for people outside (an order, one ticket per record) stays IDEM006."""

from __future__ import annotations

import pendulum
from airflow.providers.smtp.operators.smtp import EmailOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c13_daily_report",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    EmailOperator(
        task_id="mail_report",
        to="finance@example.com",
        subject="Revenue for {{ ds }}",
        html_content="See the dashboard for {{ ds }}.",
    )

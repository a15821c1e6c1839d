# Lint corpus: {{ macros.datetime.now() }} in a template
# expect: IDEM001@22
# expect-ack: none
"""The template asks Jinja for the wall clock."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c35_template_clock",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="rewrite_day",
        conn_id="warehouse",
        sql=[
            "DELETE FROM c35_daily WHERE day = '{{ macros.datetime.now().date() }}'",
            "INSERT INTO c35_daily SELECT day, COUNT(*) FROM raw WHERE day = '{{ ds }}' GROUP BY day",
        ],
    )

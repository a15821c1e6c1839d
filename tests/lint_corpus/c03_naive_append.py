# Lint corpus: plain INSERT .. SELECT for the day: appends on every rerun
# expect: IDEM002@22
# expect-ack: none
"""The anti-pattern: INSERT .. SELECT for the day, no delete, no key."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c03_payouts_append",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="append_payouts",
        conn_id="warehouse",
        sql=(
            "INSERT INTO c03_payouts_naive (sale_id, sale_date, amount_eur) "
            "SELECT sale_id, sale_date, ROUND(price_eur * 0.60, 2) FROM sales "
            "WHERE sale_date = '{{ ds }}'"
        ),
    )

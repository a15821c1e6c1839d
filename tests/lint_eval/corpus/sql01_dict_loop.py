"""Finance loads: the SQL of each load lives in a dict, one task per entry."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

LOADS = {
    "ledger": """
        INSERT INTO finance.ledger_entries (entry_id, account, amount, booked_on)
        SELECT id, account, amount, booked_on
        FROM erp.journal
        WHERE booked_on = '{{ ds }}'
    """,
    "fx_rates": """
        INSERT INTO finance.fx_rates (rate_date, currency, rate)
        SELECT rate_date, currency, rate FROM ecb.daily_rates WHERE rate_date = '{{ ds }}'
        ON CONFLICT (rate_date, currency) DO UPDATE SET rate = EXCLUDED.rate
    """,
}

with DAG(
    dag_id="finance_loads",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    for name, statement in LOADS.items():
        SQLExecuteQueryOperator(task_id=f"load_{name}", conn_id="postgres_finance", sql=statement)

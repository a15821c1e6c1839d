"""Wait for the market to close before pulling end-of-day prices."""

from __future__ import annotations

import datetime

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.standard.sensors.time import TimeSensor
from airflow.sdk import DAG

with DAG(
    dag_id="eod_prices",
    schedule="0 20 * * 1-5",
    start_date=pendulum.datetime(2025, 1, 1, tz="America/New_York"),
    catchup=False,
):
    wait = TimeSensor(
        task_id="wait_for_settlement",
        target_time=(datetime.datetime.now(tz=datetime.timezone.utc) + datetime.timedelta(minutes=30)).time(),
        deferrable=True,
    )
    load = SQLExecuteQueryOperator(
        task_id="load_prices",
        conn_id="postgres_markets",
        sql="""
            INSERT INTO markets.eod_prices (symbol, price_date, close)
            SELECT symbol, '{{ ds }}', close FROM vendor.closing_prices WHERE price_date = '{{ ds }}'
            ON CONFLICT (symbol, price_date) DO UPDATE SET close = EXCLUDED.close
        """,
    )
    wait >> load

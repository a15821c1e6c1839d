"""Seed the currency reference table; a second run fails on the primary key instead of duplicating."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="seed_currencies",
    schedule="@once",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    create = SQLExecuteQueryOperator(
        task_id="create_currencies",
        conn_id="postgres_ref",
        sql="""
            CREATE TABLE IF NOT EXISTS ref.currencies (
                code CHAR(3) PRIMARY KEY,
                name TEXT NOT NULL,
                minor_units SMALLINT NOT NULL
            )
        """,
    )
    seed = SQLExecuteQueryOperator(
        task_id="seed_currencies",
        conn_id="postgres_ref",
        sql="""
            INSERT INTO ref.currencies (code, name, minor_units) VALUES
                ('EUR', 'Euro', 2),
                ('USD', 'US Dollar', 2),
                ('JPY', 'Yen', 0)
        """,
    )
    create >> seed

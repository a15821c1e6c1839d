# Lint corpus: date.today() evaluated when the DAG file is parsed
# expect: IDEM003@27
# expect-ack: none
"""The day is bound from date.today() when the scheduler parses the file."""

from __future__ import annotations

from datetime import date

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c10_fx_rates",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="load_rates",
        conn_id="warehouse",
        sql=[
            "DELETE FROM c10_fx_rates WHERE rate_date = %(day)s",
            "INSERT INTO c10_fx_rates SELECT * FROM raw_fx WHERE rate_date = %(day)s",
        ],
        parameters={"day": date.today().isoformat()},
    )

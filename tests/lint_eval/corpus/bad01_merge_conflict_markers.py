"""Daily refunds; committed in the middle of a merge."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="refunds_daily",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
<<<<<<< HEAD
    catchup=False,
=======
    catchup=False,
    default_args={"retries": 2},
>>>>>>> feature/refund-retries
):
    SQLExecuteQueryOperator(
        task_id="load_refunds",
        conn_id="postgres_dw",
        sql="DELETE FROM refunds WHERE day = '{{ ds }}'; INSERT INTO refunds SELECT * FROM raw_refunds "
        "WHERE day = '{{ ds }}'",
    )

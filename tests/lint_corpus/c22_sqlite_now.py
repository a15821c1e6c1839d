# Lint corpus: SQLite date('now') and datetime('now', '-1 day')
# expect: IDEM001@22 IDEM004@24
# expect-ack: none
"""SQLite's clock spelled as strings: date('now') and a '-1 day' modifier."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c22_sqlite_jobs",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(
        task_id="rollup",
        conn_id="sqlite_warehouse",
        sql=[
            "DELETE FROM c22_rollup WHERE day = date('now')",
            "INSERT INTO c22_rollup SELECT date(ts), COUNT(*) FROM hits "
            "WHERE ts >= datetime('now', '-1 day') GROUP BY date(ts)",
        ],
    )

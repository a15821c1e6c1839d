"""Page-view facts: the table is created once, then each day is overwritten."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

from airflow_idempotent.operators import PartitionOverwriteOperator

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS fct_pageviews (
    view_date   DATE NOT NULL,
    page        TEXT NOT NULL,
    views       BIGINT NOT NULL,
    inserted_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
)
"""

with DAG(
    dag_id="fct_pageviews",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    create = SQLExecuteQueryOperator(task_id="create_table", conn_id="warehouse", sql=CREATE_TABLE)
    load = PartitionOverwriteOperator(
        task_id="write_pageviews",
        conn_id="warehouse",
        table="fct_pageviews",
        partition_column="view_date",
        granularity="day",
        sql=(
            "SELECT CAST(v.ts AS DATE) AS view_date, v.page, COUNT(*) AS views FROM raw_views v "
            "WHERE v.ts >= :window_start AND v.ts < :window_end GROUP BY 1, 2"
        ),
    )
    create >> load

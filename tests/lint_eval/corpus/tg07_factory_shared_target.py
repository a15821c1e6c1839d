"""Events from two sources land in one table; a factory builds one rewrite task per source."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

TARGET = "raw.events"


def source_loader(source: str) -> SQLExecuteQueryOperator:
    return SQLExecuteQueryOperator(
        task_id=f"load_{source}",
        conn_id="postgres_dw",
        sql=[
            f"DELETE FROM {TARGET} WHERE source = '{source}' AND event_date = '{{{{ ds }}}}'",
            f"INSERT INTO {TARGET} SELECT '{source}', * FROM landing.{source}_events "
            "WHERE event_date = '{{ ds }}'",
        ],
    )


with DAG(
    dag_id="events_unified",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 5, 1, tz="UTC"),
    catchup=False,
):
    source_loader("web") >> source_loader("mobile")

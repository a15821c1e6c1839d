# Lint corpus: TaskFlow task deciding its day with datetime.now()
# expect: IDEM003@17
# expect-ack: none
"""A Python task that picks "yesterday" from the wall clock, then rewrites that day."""

from __future__ import annotations

from datetime import datetime

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import DAG, task


@task
def load_day() -> None:
    day = datetime.now().strftime("%Y-%m-%d")
    hook = PostgresHook(postgres_conn_id="warehouse")
    hook.run(
        [
            "DELETE FROM c08_visits WHERE visit_date = %(day)s",
            "INSERT INTO c08_visits SELECT * FROM raw_visits WHERE visit_date = %(day)s",
        ],
        parameters={"day": day},
    )


with DAG(
    dag_id="c08_visits",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    load_day()

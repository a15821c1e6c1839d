# Lint corpus: pendulum.now().subtract(hours=6): the last 6 hours
# expect: IDEM004@15
# expect-ack: none
"""Reads the last six hours of clicks relative to when it runs."""

from __future__ import annotations

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import DAG, task


@task
def load_clicks() -> None:
    since = pendulum.now("UTC").subtract(hours=6)
    hook = PostgresHook(postgres_conn_id="warehouse")
    hook.run(
        "INSERT INTO c09_clicks SELECT * FROM raw_clicks WHERE ts >= %(since)s "
        "ON CONFLICT (click_id) DO NOTHING",
        parameters={"since": since},
    )


with DAG(
    dag_id="c09_clicks",
    schedule="0 */6 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    load_clicks()

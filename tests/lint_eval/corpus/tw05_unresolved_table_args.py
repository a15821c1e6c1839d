"""Copy two reference tables with one helper; the table name is only known per call."""

from __future__ import annotations

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import dag, task


def copy_table(source: str, target: str) -> None:
    PostgresHook(postgres_conn_id="postgres_dw").run(
        [f"TRUNCATE {target}", f"INSERT INTO {target} SELECT * FROM {source}"]
    )


@dag(schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def reference_copies():
    @task
    def copy_countries() -> None:
        copy_table("ref_src.countries", "ref.countries")

    @task
    def copy_currencies() -> None:
        copy_table("ref_src.currencies", "ref.currencies")

    copy_countries() >> copy_currencies()


reference_copies()

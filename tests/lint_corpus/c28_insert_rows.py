# Lint corpus: hook.insert_rows without replace=True, and with it
# expect: IDEM002@16
# expect-ack: none
"""Rows pushed from Python: insert_rows appends unless replace=True."""

from __future__ import annotations

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import DAG, task


@task
def push_scores(ds: str | None = None) -> None:
    rows = [(ds, "a", 1), (ds, "b", 2)]
    PostgresHook(postgres_conn_id="warehouse").insert_rows("c28_scores", rows)


@task
def push_ranks(ds: str | None = None) -> None:
    rows = [(ds, "a", 1)]
    PostgresHook(postgres_conn_id="warehouse").insert_rows(
        "c28_ranks", rows, target_fields=["day", "team", "rank"], replace=True, replace_index=["day", "team"]
    )


with DAG(
    dag_id="c28_scores",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    push_scores() >> push_ranks()

"""Incremental CRM sync: the high-water mark is kept in an Airflow Variable."""

from __future__ import annotations

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import DAG, Variable, task

with DAG(
    dag_id="crm_incremental_sync",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
):

    @task
    def sync_accounts() -> None:
        since = Variable.get("crm_accounts_watermark", default="1970-01-01T00:00:00+00:00")
        PostgresHook(postgres_conn_id="postgres_dw").run(
            """
            INSERT INTO crm.accounts (account_id, name, tier, modified_at)
            SELECT id, name, tier, modified_at FROM crm_replica.accounts WHERE modified_at > %(since)s
            ON CONFLICT (account_id) DO UPDATE
            SET name = EXCLUDED.name, tier = EXCLUDED.tier, modified_at = EXCLUDED.modified_at
            """,
            parameters={"since": since},
        )

    @task
    def save_watermark() -> None:
        hook = PostgresHook(postgres_conn_id="postgres_dw")
        (latest,) = hook.get_first("SELECT MAX(modified_at) FROM crm.accounts")
        Variable.set("crm_accounts_watermark", latest.isoformat())

    sync_accounts() >> save_watermark()

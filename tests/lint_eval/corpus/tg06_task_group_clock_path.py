"""Nightly CSV export of active subscriptions to the partner bucket."""

from __future__ import annotations

from datetime import datetime

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import dag, task, task_group


@task_group(group_id="export")
def export_subscriptions():
    @task
    def write_file() -> str:
        hook = PostgresHook(postgres_conn_id="postgres_app")
        df = hook.get_pandas_df("SELECT id, plan, status FROM subscriptions WHERE status = 'active'")
        key = f"s3://partner-drop/subscriptions/{datetime.now():%Y-%m-%d}/subscriptions.csv"
        df.to_csv(key, index=False)
        return key

    @task
    def notify(key: str) -> None:
        print(f"exported {key}")

    notify(write_file())


@dag(schedule="0 2 * * *", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def partner_subscription_export():
    export_subscriptions()


partner_subscription_export()

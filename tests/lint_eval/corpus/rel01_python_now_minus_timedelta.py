"""Hourly fraud features: the task computes its own "last hour" window."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import dag, task


@dag(schedule="@hourly", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def fraud_features_hourly():
    @task(retries=2)
    def compute_features() -> int:
        window_end = datetime.now(timezone.utc)
        window_start = window_end - timedelta(hours=1)
        hook = PostgresHook(postgres_conn_id="postgres_risk")
        hook.run(
            """
            INSERT INTO risk.card_velocity (card_id, window_end, tx_count)
            SELECT card_id, %(end)s, COUNT(*)
            FROM payments.transactions
            WHERE created_at >= %(start)s AND created_at < %(end)s
            GROUP BY card_id
            ON CONFLICT (card_id, window_end) DO NOTHING
            """,
            parameters={"start": window_start, "end": window_end},
        )
        return 0

    compute_features()


fraud_features_hourly()

"""Warehouse vacuum-and-load job with some leftover timing code."""

from __future__ import annotations

import logging
from datetime import datetime

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import dag, task

log = logging.getLogger(__name__)


@dag(schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def sessions_daily():
    @task(retries=2)
    def load_sessions(data_interval_start=None, data_interval_end=None) -> None:
        started = datetime.now()  # noqa: F841  (kept from a timing experiment)
        log.info("load_sessions starting at %s", datetime.now().isoformat())
        hook = PostgresHook(postgres_conn_id="postgres_dw")
        hook.run(
            [
                "DELETE FROM web.sessions WHERE started_at >= %(start)s AND started_at < %(end)s",
                "INSERT INTO web.sessions SELECT * FROM raw.sessions "
                "WHERE started_at >= %(start)s AND started_at < %(end)s",
            ],
            parameters={"start": data_interval_start, "end": data_interval_end},
        )

    load_sessions()


sessions_daily()

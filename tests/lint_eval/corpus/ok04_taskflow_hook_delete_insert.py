"""TaskFlow task that rewrites its day through the hook, with the window bound as parameters."""

from __future__ import annotations

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import dag, task

DELETE_DAY = "DELETE FROM mart.daily_signups WHERE signup_date = %(day)s"
INSERT_DAY = """
INSERT INTO mart.daily_signups (signup_date, country, signups)
SELECT created_at::date, country, COUNT(*)
FROM app.users
WHERE created_at::date = %(day)s
GROUP BY 1, 2
"""


@dag(schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def daily_signups():
    @task(retries=3)
    def rewrite_day(ds=None) -> None:
        hook = PostgresHook(postgres_conn_id="postgres_dw")
        hook.run([DELETE_DAY, INSERT_DAY], autocommit=False, parameters={"day": ds})

    rewrite_day()


daily_signups()

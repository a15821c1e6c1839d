# Lint corpus: @dag with TaskFlow tasks reading the run's context: idempotent
# expect: none
# expect-ack: none
"""@dag and @task: the day comes from the run's context, the write deletes then inserts."""

from __future__ import annotations

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def c30_signups() -> None:
    @task(retries=2)
    def load(data_interval_start: pendulum.DateTime | None = None) -> None:
        hook = PostgresHook(postgres_conn_id="warehouse")
        hook.run(
            [
                "DELETE FROM c30_signups WHERE day = %(day)s",
                "INSERT INTO c30_signups SELECT day, COUNT(*) FROM raw_signups WHERE day = %(day)s "
                "GROUP BY day",
            ],
            parameters={"day": data_interval_start},
        )

    load()


c30_signups()

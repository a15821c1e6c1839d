# Lint corpus: the run's start picks the partition the repository's own operator reads and loads
# expect: IDEM004@47
# expect-ack: none
"""c39's shape with the defect (round 8's hourly counts loaded by the run's start hour): the
operator downloads the file named by the run's wall-clock start and loads it. A run cleared an hour
later reads another hour's file, and its own hour is never loaded: IDEM004."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.models import BaseOperator
from airflow.providers.google.cloud.hooks.gcs import GCSHook
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import DAG


class HourlyCountsToPostgresOperator(BaseOperator):
    template_fields = ("hour",)

    def __init__(self, hour: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.hour = hour

    def source_name(self) -> str:
        return os.path.join("counts", f"hour={self.hour}", "counts.csv")

    def execute(self, context: dict[str, object]) -> dict[str, str]:
        local = GCSHook().download(
            bucket_name="counts", object_name=self.source_name(), filename="/tmp/c40_counts.csv"
        )
        PostgresHook(postgres_conn_id="warehouse").copy_expert(
            "COPY c40_hourly_counts FROM STDIN WITH CSV", local
        )
        return {"hour": self.hour}


with DAG(
    dag_id="c40_hourly_counts",
    schedule="@hourly",
    start_date=datetime(2026, 1, 1),
    catchup=False,
):
    HourlyCountsToPostgresOperator(
        task_id="load_hourly_counts",
        hour="{{ dag_run.start_date.strftime('%Y-%m-%dT%H') }}",
    )

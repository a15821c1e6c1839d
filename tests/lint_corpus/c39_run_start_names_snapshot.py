# Lint corpus: the run's start only names the snapshot the repository's own operator writes
# expect: none
# expect-ack: none
"""Round 20 (cal-itp's feed downloads): the run's wall-clock start, handed to an operator whose code
only labels what it uploads with it (the object's name, its metadata, the returned record) and reads
nothing by it, names a snapshot of the current feed taken at that moment. A rerun uploads another
snapshot beside it; no span is read. IDEM004's condition holds, so it is information (c40: the same
start selecting what the operator reads stays IDEM004)."""

from __future__ import annotations

import json
import os
from datetime import datetime

from airflow.models import BaseOperator
from airflow.providers.google.cloud.hooks.gcs import GCSHook
from airflow.providers.http.hooks.http import HttpHook
from airflow.sdk import DAG


class FeedToGCSOperator(BaseOperator):
    template_fields = ("ts", "destination_path")

    def __init__(self, url: str, ts: str, destination_path: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.url = url
        self.ts = ts
        self.destination_path = destination_path

    def metadata(self) -> dict[str, str]:
        return {"url": self.url, "ts": self.ts}

    def execute(self, context: dict[str, object]) -> dict[str, str]:
        response = HttpHook(method="GET").run(endpoint=self.url)
        object_name = os.path.join(self.destination_path, "feed.zip")
        self.log.info("snapshot of %s taken at %s", self.url, self.ts)
        GCSHook().upload(
            bucket_name="feeds",
            object_name=object_name,
            data=response.content,
            metadata={"artifact": json.dumps(self.metadata())},
        )
        return {"path": object_name, "ts": self.ts}


with DAG(dag_id="c39_feed_snapshots", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False):
    FeedToGCSOperator(
        task_id="download_feed",
        url="/feeds/current.zip",
        ts="{{ dag_run.start_date | ts }}",
        destination_path="feeds/ts={{ dag_run.start_date | ts }}",
    )

"""Sync yesterday's log partition from the CDN bucket and compact it."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

with DAG(
    dag_id="cdn_logs_sync",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    sync = BashOperator(
        task_id="sync_logs",
        bash_command=(
            "aws s3 sync s3://acme-cdn-logs/dt=$(date -d yesterday +%Y-%m-%d)/ "
            "/data/cdn/dt=$(date -d yesterday +%Y-%m-%d)/ --delete"
        ),
    )
    compact = BashOperator(
        task_id="compact_logs",
        bash_command="python /opt/jobs/compact.py --day {{ ds }} --input /data/cdn --overwrite",
    )
    sync >> compact

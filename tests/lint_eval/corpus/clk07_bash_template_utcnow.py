"""Export the pricing snapshot with the dbt-style runner script."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

with DAG(
    dag_id="pricing_snapshot_export",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    BashOperator(
        task_id="export_snapshot",
        bash_command=(
            "python /opt/jobs/export_prices.py "
            "--as-of '{{ macros.datetime.utcnow().isoformat() }}' "
            "--output s3://acme-pricing/snapshots/{{ ds }}/prices.parquet"
        ),
    )

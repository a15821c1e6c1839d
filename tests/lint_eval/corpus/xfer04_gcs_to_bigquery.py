"""Ad platform exports from GCS to BigQuery."""

from __future__ import annotations

import pendulum
from airflow.providers.google.cloud.transfers.gcs_to_bigquery import GCSToBigQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="ads_exports_to_bq",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    impressions = GCSToBigQueryOperator(
        task_id="load_impressions",
        bucket="acme-ads-exports",
        source_objects=["impressions/{{ ds }}/*.json"],
        source_format="NEWLINE_DELIMITED_JSON",
        destination_project_dataset_table="acme.ads.impressions",
        write_disposition="WRITE_APPEND",
    )
    spend = GCSToBigQueryOperator(
        task_id="load_spend",
        bucket="acme-ads-exports",
        source_objects=["spend/{{ ds }}/*.csv"],
        destination_project_dataset_table="acme.ads.spend${{ ds_nodash }}",
        write_disposition="WRITE_TRUNCATE",
        time_partitioning={"type": "DAY", "field": "spend_date"},
    )
    impressions >> spend

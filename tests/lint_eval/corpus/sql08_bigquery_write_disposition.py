"""Orders to BigQuery: a partition rewrite and an appending audit copy."""

from __future__ import annotations

import pendulum
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.sdk import DAG

with DAG(
    dag_id="bq_orders_daily",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    partition = BigQueryInsertJobOperator(
        task_id="write_partition",
        configuration={
            "query": {
                "query": "SELECT * FROM `acme.raw.orders` WHERE DATE(created_at) = '{{ ds }}'",
                "useLegacySql": False,
                "destinationTable": {
                    "projectId": "acme",
                    "datasetId": "core",
                    "tableId": "orders${{ ds_nodash }}",
                },
                "writeDisposition": "WRITE_TRUNCATE",
            }
        },
    )
    audit = BigQueryInsertJobOperator(
        task_id="copy_to_audit",
        configuration={
            "query": {
                "query": "SELECT *, '{{ run_id }}' AS run_id FROM `acme.core.orders` "
                "WHERE DATE(created_at) = '{{ ds }}'",
                "useLegacySql": False,
                "destinationTable": {"projectId": "acme", "datasetId": "audit", "tableId": "orders_log"},
                "writeDisposition": "WRITE_APPEND",
            }
        },
    )
    partition >> audit

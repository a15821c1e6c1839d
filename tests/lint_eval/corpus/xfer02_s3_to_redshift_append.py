"""Clickstream parquet copied from S3 into Redshift."""

from __future__ import annotations

import pendulum
from airflow.providers.amazon.aws.transfers.s3_to_redshift import S3ToRedshiftOperator
from airflow.sdk import DAG

with DAG(
    dag_id="clickstream_to_redshift",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    S3ToRedshiftOperator(
        task_id="copy_clicks",
        redshift_conn_id="redshift_default",
        s3_bucket="acme-clickstream",
        s3_key="clicks/{{ data_interval_start.strftime('%Y/%m/%d/%H') }}/",
        schema="events",
        table="clicks",
        copy_options=["FORMAT AS PARQUET"],
    )

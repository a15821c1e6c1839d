"""Partner CSV drops loaded into Postgres with S3ToSqlOperator."""

from __future__ import annotations

import csv

import pendulum
from airflow.providers.amazon.aws.transfers.s3_to_sql import S3ToSqlOperator
from airflow.sdk import DAG


def parse_csv(filepath):
    with open(filepath, newline="") as file:
        yield from csv.reader(file)


with DAG(
    dag_id="partner_deliveries",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    S3ToSqlOperator(
        task_id="load_deliveries",
        s3_bucket="partner-drop",
        s3_key="deliveries/{{ ds }}/deliveries.csv",
        table="deliveries",
        schema="raw",
        column_list=["delivery_id", "order_id", "delivered_at"],
        parser=parse_csv,
        sql_conn_id="postgres_dw",
    )

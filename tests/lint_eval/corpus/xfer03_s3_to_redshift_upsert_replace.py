"""Redshift loads that are safe to rerun: UPSERT on the key, REPLACE for small lookups."""

from __future__ import annotations

import pendulum
from airflow.providers.amazon.aws.transfers.s3_to_redshift import S3ToRedshiftOperator
from airflow.sdk import DAG

with DAG(
    dag_id="crm_to_redshift",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 3},
):
    contacts = S3ToRedshiftOperator(
        task_id="upsert_contacts",
        s3_bucket="acme-crm-export",
        s3_key="contacts/{{ ds }}/",
        schema="crm",
        table="contacts",
        method="UPSERT",
        upsert_keys=["contact_id"],
        copy_options=["FORMAT AS CSV", "IGNOREHEADER 1"],
    )
    countries = S3ToRedshiftOperator(
        task_id="replace_countries",
        s3_bucket="acme-crm-export",
        s3_key="lookups/countries.csv",
        schema="crm",
        table="countries",
        method="REPLACE",
        copy_options=["FORMAT AS CSV", "IGNOREHEADER 1"],
    )
    contacts >> countries

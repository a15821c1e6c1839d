"""Stage the day's CRM contacts for the enrichment vendor, tagged with a batch id."""

from __future__ import annotations

import uuid

import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False)
def enrichment_staging():
    @task
    def stage_contacts(ds=None) -> str:
        hook = PostgresHook(postgres_conn_id="postgres_crm")
        df = hook.get_pandas_df(
            "SELECT contact_id, email FROM crm.contacts WHERE created_on = %(ds)s", parameters={"ds": ds}
        )
        batch_id = str(uuid.uuid4())
        df["batch_id"] = batch_id
        df.to_sql("enrichment_outbox", hook.get_sqlalchemy_engine(), schema="vendor", if_exists="replace")
        return batch_id

    stage_contacts()


enrichment_staging()

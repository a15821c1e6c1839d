# Lint corpus: DataFrame.to_sql(if_exists='append') in a retried task
# expect: IDEM002@18
# expect-ack: none
"""pandas to_sql in append mode, with retries."""

from __future__ import annotations

import pandas as pd
import pendulum
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import DAG, task


@task(retries=3)
def load_prices(ds: str | None = None) -> None:
    frame = pd.read_csv(f"s3://prices/{ds}.csv")
    engine = PostgresHook(postgres_conn_id="warehouse").get_sqlalchemy_engine()
    frame.to_sql("c29_prices", engine, if_exists="append", index=False)


with DAG(
    dag_id="c29_prices",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    load_prices()

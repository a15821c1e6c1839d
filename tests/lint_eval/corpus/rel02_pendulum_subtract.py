"""Download yesterday's exchange rates file from the bank's SFTP."""

from __future__ import annotations

import pendulum
from airflow.providers.sftp.hooks.sftp import SFTPHook
from airflow.sdk import DAG, task

with DAG(
    dag_id="bank_rates_download",
    schedule="0 5 * * *",
    start_date=pendulum.datetime(2025, 1, 1, tz="Europe/Berlin"),
    catchup=False,
):

    @task
    def download_rates() -> str:
        day = pendulum.now("Europe/Berlin").subtract(days=1).format("YYYYMMDD")
        local = f"/tmp/rates_{day}.csv"
        SFTPHook(ssh_conn_id="bank_sftp").retrieve_file(f"/outbound/rates_{day}.csv", local)
        return local

    @task
    def upload(local: str) -> None:
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        S3Hook().load_file(local, key=f"rates/{local.rsplit('/', 1)[-1]}", bucket_name="acme-fx", replace=True)

    upload(download_rates())

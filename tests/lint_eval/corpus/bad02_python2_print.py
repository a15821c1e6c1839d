"""Legacy DAG from an Airflow 1.x repo, never ported to Python 3."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def report(**context):
    print "reporting for", context["ds"]


with DAG(
    dag_id="legacy_report",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    PythonOperator(task_id="report", python_callable=report)

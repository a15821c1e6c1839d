"""Nightly ML scoring; start_date written the way old tutorials wrote days_ago(2)."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="churn_scoring",
    schedule="@daily",
    start_date=pendulum.today("UTC").add(days=-2),
    catchup=False,
    default_args={"retries": 1},
):
    SQLExecuteQueryOperator(
        task_id="score_customers",
        conn_id="postgres_ml",
        sql="""
            DELETE FROM ml.churn_scores WHERE score_date = '{{ ds }}';
            INSERT INTO ml.churn_scores (customer_id, score_date, score)
            SELECT customer_id, '{{ ds }}', ml.churn_model(features)
            FROM ml.churn_features WHERE feature_date = '{{ ds }}';
        """,
    )

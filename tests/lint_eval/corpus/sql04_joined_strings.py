"""Churn features, SQL assembled from pieces with str.join and +."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

FEATURES = ["customer_id", "days_since_last_order", "orders_90d", "revenue_90d"]
TARGET = "ml.churn_features"

INSERT_FEATURES = "\n".join(
    [
        f"INSERT INTO {TARGET} ({', '.join(FEATURES)}, feature_date)",
        f"SELECT {', '.join(FEATURES)}, '{{{{ ds }}}}'",
        "FROM ml.customer_activity",
        "WHERE activity_date = '{{ ds }}'",
    ]
)

CLEAN_SCORES = "DELETE FROM ml.churn_scores " + "WHERE score_date = '{{ ds }}'"

with DAG(
    dag_id="churn_features",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    features = SQLExecuteQueryOperator(task_id="build_features", conn_id="postgres_ml", sql=INSERT_FEATURES)
    clean = SQLExecuteQueryOperator(task_id="clean_scores", conn_id="postgres_ml", sql=CLEAN_SCORES)
    features >> clean

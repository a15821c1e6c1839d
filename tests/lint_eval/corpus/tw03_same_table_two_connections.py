"""Publish the price list to the EU and the US shop databases (same schema, two servers)."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

PUBLISH = """
TRUNCATE shop.price_list;
INSERT INTO shop.price_list (sku, price, currency)
SELECT sku, price, currency FROM pricing_export.price_list WHERE valid_on = '{{ ds }}';
"""

with DAG(
    dag_id="publish_price_list",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    eu = SQLExecuteQueryOperator(task_id="publish_eu", conn_id="postgres_shop_eu", sql=PUBLISH)
    us = SQLExecuteQueryOperator(task_id="publish_us", conn_id="postgres_shop_us", sql=PUBLISH)

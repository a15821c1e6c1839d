"""Replicate the app's orders into the warehouse with GenericTransfer."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.generic_transfer import GenericTransfer
from airflow.sdk import DAG

with DAG(
    dag_id="orders_replication",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    orders = GenericTransfer(
        task_id="replicate_orders",
        source_conn_id="mysql_app",
        destination_conn_id="postgres_dw",
        destination_table="replica.orders",
        preoperator="DELETE FROM replica.orders WHERE created_at::date = '{{ ds }}'",
        sql="SELECT * FROM orders WHERE DATE(created_at) = '{{ ds }}'",
    )
    order_items = GenericTransfer(
        task_id="replicate_order_items",
        source_conn_id="mysql_app",
        destination_conn_id="postgres_dw",
        destination_table="replica.order_items",
        sql="SELECT * FROM order_items WHERE DATE(created_at) = '{{ ds }}'",
    )
    orders >> order_items

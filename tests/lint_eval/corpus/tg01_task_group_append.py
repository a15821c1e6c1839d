"""Orders ingestion, grouped per source system with @task_group."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import dag, task_group


@task_group
def load_orders():
    SQLExecuteQueryOperator(
        task_id="insert_orders",
        conn_id="postgres_dw",
        sql="""
            INSERT INTO analytics.orders (order_id, customer_id, amount, order_date)
            SELECT o.id, o.customer_id, o.amount, o.created_at::date
            FROM raw.shop_orders o
            WHERE o.created_at >= '{{ data_interval_start }}'
              AND o.created_at < '{{ data_interval_end }}'
        """,
    )


@task_group(group_id="refunds")
def load_refunds():
    SQLExecuteQueryOperator(
        task_id="upsert_refunds",
        conn_id="postgres_dw",
        sql="""
            INSERT INTO analytics.refunds (refund_id, order_id, amount, refund_date)
            SELECT r.id, r.order_id, r.amount, r.created_at::date
            FROM raw.shop_refunds r
            WHERE r.created_at >= '{{ data_interval_start }}'
              AND r.created_at < '{{ data_interval_end }}'
            ON CONFLICT (refund_id) DO UPDATE SET amount = EXCLUDED.amount
        """,
    )


@dag(
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 6, 1, tz="UTC"),
    catchup=False,
    tags=["shop", "ingest"],
)
def shop_orders_hourly():
    load_orders() >> load_refunds()


shop_orders_hourly()

"""One-off style migration kept as a DAG: sequence-backed ids for the orders table."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

MIGRATE = [
    "CREATE SEQUENCE IF NOT EXISTS shop.orders_id_seq",
    "ALTER TABLE shop.orders ALTER COLUMN id SET DEFAULT nextval('shop.orders_id_seq')",
    "ALTER SEQUENCE shop.orders_id_seq OWNED BY shop.orders.id",
    "ALTER TABLE shop.orders ALTER COLUMN created_at SET DEFAULT now()",
]

with DAG(
    dag_id="migrate_orders_ids",
    schedule=None,
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    tags=["migration"],
):
    SQLExecuteQueryOperator(task_id="migrate", conn_id="postgres_shop", sql=MIGRATE)

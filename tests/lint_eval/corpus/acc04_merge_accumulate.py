"""Stock levels in Snowflake: received quantities merged into the running stock figure."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

RECEIVE = """
MERGE INTO inventory.stock t
USING (
    SELECT sku, warehouse_id, SUM(qty) AS qty
    FROM inventory.goods_received
    WHERE received_on = '{{ ds }}'
    GROUP BY sku, warehouse_id
) s
ON t.sku = s.sku AND t.warehouse_id = s.warehouse_id
WHEN MATCHED THEN UPDATE SET t.on_hand = t.on_hand + s.qty
WHEN NOT MATCHED THEN INSERT (sku, warehouse_id, on_hand) VALUES (s.sku, s.warehouse_id, s.qty)
"""

with DAG(
    dag_id="stock_receipts",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    SQLExecuteQueryOperator(task_id="receive_goods", conn_id="snowflake_default", sql=RECEIVE)

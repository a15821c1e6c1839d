"""Customers table with an updated_at trigger, kept up to date by a daily merge."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

SETUP = """
CREATE TABLE IF NOT EXISTS crm.customers (
    customer_id BIGINT PRIMARY KEY,
    name TEXT,
    updated_at TIMESTAMPTZ
);
CREATE OR REPLACE FUNCTION crm.touch_updated_at() RETURNS trigger AS $$
BEGIN
    NEW.updated_at = now();
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS customers_touch ON crm.customers;
CREATE TRIGGER customers_touch BEFORE UPDATE ON crm.customers
    FOR EACH ROW EXECUTE FUNCTION crm.touch_updated_at();
"""

MERGE = """
INSERT INTO crm.customers (customer_id, name)
SELECT id, name FROM crm_export.customers WHERE exported_on = '{{ ds }}'
ON CONFLICT (customer_id) DO UPDATE SET name = EXCLUDED.name
"""

with DAG(
    dag_id="crm_customers",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    setup = SQLExecuteQueryOperator(task_id="setup_table", conn_id="postgres_crm", sql=SETUP)
    merge = SQLExecuteQueryOperator(task_id="merge_customers", conn_id="postgres_crm", sql=MERGE)
    setup >> merge

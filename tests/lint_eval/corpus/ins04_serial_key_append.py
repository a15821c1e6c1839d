"""Pet adoption demo: the insert lets the SERIAL key number every row anew."""

from __future__ import annotations

import datetime

from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="pet_registry",
    start_date=datetime.datetime(2025, 1, 1),
    schedule="@daily",
    catchup=False,
):
    create_pet_table = SQLExecuteQueryOperator(
        task_id="create_pet_table",
        conn_id="postgres_default",
        sql="""
            CREATE TABLE IF NOT EXISTS pet (
                pet_id SERIAL PRIMARY KEY,
                name VARCHAR NOT NULL,
                pet_type VARCHAR NOT NULL,
                birth_date DATE NOT NULL,
                owner VARCHAR NOT NULL);
        """,
    )
    populate_pet_table = SQLExecuteQueryOperator(
        task_id="populate_pet_table",
        conn_id="postgres_default",
        sql="""
            INSERT INTO pet (name, pet_type, birth_date, owner)
            VALUES ('Max', 'Dog', '2018-07-05', 'Jane');
            INSERT INTO pet (name, pet_type, birth_date, owner)
            VALUES ('Susie', 'Cat', '2019-05-01', 'Phil');
        """,
    )
    create_pet_table >> populate_pet_table

"""Every 15 minutes since 2023: a decorator DAG with catchup and no end."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import dag


@dag(
    schedule="*/15 * * * *",
    start_date=pendulum.datetime(2023, 1, 1, tz="UTC"),
    catchup=True,
    tags=["iot"],
)
def sensor_readings_15min():
    SQLExecuteQueryOperator(
        task_id="aggregate_readings",
        conn_id="postgres_iot",
        sql="""
            INSERT INTO iot.readings_15min (device_id, bucket_start, avg_temp)
            SELECT device_id, '{{ data_interval_start }}', AVG(temp)
            FROM iot.readings
            WHERE ts >= '{{ data_interval_start }}' AND ts < '{{ data_interval_end }}'
            GROUP BY device_id
            ON CONFLICT (device_id, bucket_start) DO UPDATE SET avg_temp = EXCLUDED.avg_temp
        """,
    )


sensor_readings_15min()

"""Windows with no width: this package's operators on Airflow 3 trigger timetables, no granularity."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable
from airflow.timetables.trigger import CronTriggerTimetable

from airflow_idempotent.effects.builtin import HttpPostEffectOperator
from airflow_idempotent.operators import MergeOperator

ORDERS = (
    "SELECT o.order_id, o.ordered_at, o.total_eur FROM orders o "
    "WHERE o.ordered_at >= :window_start AND o.ordered_at < :window_end"
)

with DAG(
    dag_id="orders_every_four_hours",
    schedule=timedelta(hours=4),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    default_args={"retries": 2},
):
    notify = HttpPostEffectOperator(
        task_id="notify_finance",
        url="https://finance.example.com/api/orders-loaded",
        key="orders-v1",
        json={"window": "{{ window }}"},
    )

with DAG(
    dag_id="orders_trigger_timetable",
    schedule=CronTriggerTimetable("15 2 * * *", timezone="Europe/Lisbon"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
):
    MergeOperator(task_id="merge_orders", table="orders_daily", key_columns=["order_id"], sql=ORDERS)

with DAG(
    dag_id="orders_interval_timetable",
    schedule=CronDataIntervalTimetable("15 2 * * *", timezone="Europe/Lisbon"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
):
    MergeOperator(task_id="merge_orders", table="orders_daily_b", key_columns=["order_id"], sql=ORDERS)

with DAG(
    dag_id="orders_declared_width",
    schedule="15 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
):
    MergeOperator(
        task_id="merge_orders",
        table="orders_daily_c",
        key_columns=["order_id"],
        sql=ORDERS,
        granularity="day",
        anchor="end",
    )

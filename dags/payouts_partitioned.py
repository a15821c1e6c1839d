"""Partitioned payouts (Airflow 3.2+): a run per daily partition, a downstream run per partition written.

- payouts_partitioned: scheduled on a CronPartitionTimetable, so each run carries a partition key
  (e.g. "2026-08-25T00:00:00"); the operator's window is that partition's day (granularity="day",
  the partition comes first in the window rule) and its asset event carries the partition key.
- payout_days: scheduled on the asset of that table with a PartitionedAssetTimetable and a
  StartOfDayMapper, so it runs once per partition written, with the key "2026-08-25", and rewrites
  that day of its summary table payout_days.

Both write through the Airflow connection `warehouse` and read what the scenario's `sales` holds.
A run for any partition can also be triggered with its key (REST: POST .../dagRuns with
{"partition_key": "2026-08-25T00:00:00", "logical_date": null}).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, CronPartitionTimetable, Param, PartitionedAssetTimetable, StartOfDayMapper, task

from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payout_days, create_payouts
from airflow_idempotent.hooks.warehouse import WarehouseHook
from airflow_idempotent.operators import PartitionOverwriteOperator
from airflow_idempotent.operators.assets import target_asset

CONN_ID = "warehouse"
TABLE = "payouts_partitioned"
START = pendulum.datetime(2026, 8, 1, tz="UTC")
#: One row per day of payouts: what the downstream DAG writes for each partition.
DAY_SUMMARY_SQL = (
    f"SELECT p.sale_date, COUNT(*) AS payouts, SUM(p.amount_eur) AS amount_eur FROM {TABLE} p "
    "WHERE p.sale_date >= :window_start AND p.sale_date < :window_end GROUP BY p.sale_date"
)


@task
def ensure_payouts() -> None:
    """Create the partitioned payouts table when it is missing."""
    create_payouts(WarehouseHook(conn_id=CONN_ID).engine, table=TABLE)


@task
def ensure_payout_days() -> None:
    """Create the daily summary table when it is missing (two partitions' runs may start at once)."""
    create_payout_days(WarehouseHook(conn_id=CONN_ID).engine)


with DAG(
    dag_id="payouts_partitioned",
    schedule=CronPartitionTimetable("0 0 * * *", timezone="UTC"),
    start_date=START,
    catchup=False,
    params={"policy_version": Param("v1", type="string", enum=["v1", "v2"])},
    default_args={"retries": 2},
    tags=["idempotent", "payouts", "partitioned"],
    doc_md="Payouts per daily partition: the window is the run's partition; its asset event names it.",
):
    ensure_payouts() >> PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id=CONN_ID,
        table=TABLE,
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        parameters={"policy_version": "{{ params.policy_version }}"},
        granularity="day",
    )


with DAG(
    dag_id="payout_days",
    schedule=PartitionedAssetTimetable(
        assets=target_asset(CONN_ID, TABLE), default_partition_mapper=StartOfDayMapper()
    ),
    start_date=START,
    catchup=False,
    default_args={"retries": 2},
    tags=["idempotent", "payouts", "partitioned"],
    doc_md="The daily payout summary, rewritten once for each partition of payouts_partitioned written.",
):
    ensure_payout_days() >> PartitionOverwriteOperator(
        task_id="write_payout_days",
        conn_id=CONN_ID,
        table="payout_days",
        partition_column="sale_date",
        key_columns=["sale_date"],
        sql=DAY_SUMMARY_SQL,
        granularity="day",
    )

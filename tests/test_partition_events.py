"""A partitioned run's asset event carries its partition key: downstream runs per partition."""

from __future__ import annotations

import pendulum
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_idempotent.operators import PartitionOverwriteOperator
from airflow_idempotent.operators.assets import target_asset
from airflow_idempotent.window import Window

DAY = Window(
    pendulum.datetime(2026, 8, 25, tz="UTC"), pendulum.datetime(2026, 8, 26, tz="UTC"), source="partition_key"
)


def operator() -> PartitionOverwriteOperator:
    return PartitionOverwriteOperator(
        task_id="write", table="payouts", sql="SELECT 1", partition_column="sale_date", granularity="day"
    )


def test_partitioned_run_event_names_its_partition() -> None:
    events = OutletEventAccessors()
    context = {"outlet_events": events, "partition_key": "2026-08-25T00:00:00"}
    operator().emit_asset_event(context, DAY, {"ordinal": 1})
    event = events[target_asset("warehouse", "payouts")]
    assert event.partition_keys == {"2026-08-25T00:00:00"}
    assert event.extra["partition_key"] == "2026-08-25T00:00:00" and event.extra["window"] == "2026-08-25"


def test_unpartitioned_run_event_has_no_partition() -> None:
    events = OutletEventAccessors()
    operator().emit_asset_event({"outlet_events": events}, DAY, {})
    event = events[target_asset("warehouse", "payouts")]
    assert event.partition_keys == set() and event.extra["partition_key"] is None

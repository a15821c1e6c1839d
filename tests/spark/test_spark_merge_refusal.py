"""A MergeOperator on a Spark connection is built whatever the table: whether it merges (a Delta
table) or is refused (parquet) is known from the catalog at run time (test_spark_delta.py,
test_spark_overwrite.py). No cluster needed."""

from __future__ import annotations

import json

import pytest
import sqlglot

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardRefusal, Thresholds
from airflow_idempotent.operators import MergeOperator
from airflow_idempotent.spark.adapter import SparkAdapter, SparkEngine
from airflow_idempotent.spark.guard import guarded_spark_write
from airflow_idempotent.window import covered_windows, spanning, window_of
from airflow_idempotent.write_spec import WriteSpec


def merge(conn_id: str) -> MergeOperator:
    return MergeOperator(
        task_id="merge_payouts",
        conn_id=conn_id,
        table="payouts",
        key_columns=["sale_id"],
        partition_column="sale_date",
        sql=PAYOUT_SQL,
        granularity="day",
        emit_asset=False,
    )


@pytest.mark.parametrize(
    "value",
    [
        json.dumps({"conn_type": "spark_connect", "host": "spark.example", "port": 15002}),
        "spark-connect://spark.example:15002",
    ],
)
def test_not_refused_when_the_dag_is_parsed(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """A Spark table may be Delta (merged) or parquet (refused): only the catalog knows, at run time."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_PARSED", value)
    assert merge("spark_parsed").conn_id == "spark_parsed"


def test_other_connections_are_not_refused_at_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_PG_PARSED", "postgresql://u@127.0.0.1:5432/db")
    monkeypatch.setenv("AIRFLOW_CONN_BAD_PARSED", "{not json")
    assert merge("pg_parsed").conn_id == "pg_parsed"
    assert merge("bad_parsed").conn_id == "bad_parsed"


def test_a_guarded_write_with_lookback_on_spark_is_refused_before_any_connection() -> None:
    """An unguarded write with lookback commits on Delta and Iceberg (test_spark_lookback); a
    guarded one is refused first, on every format: the engine at a port nothing listens on proves
    it is refused before the table is looked up."""
    periods = covered_windows(window_of("2026-08-25"), 1, "day")
    spec = WriteSpec(
        "payouts", sqlglot.parse_one(PAYOUT_SQL), spanning(periods), "sale_date", periods=tuple(periods)
    )
    adapter = SparkAdapter(SparkEngine("sc://127.0.0.1:1", "nowhere"))
    with pytest.raises(GuardRefusal, match=r"lookback=1 on Spark is not supported yet.*Nothing was written"):
        guarded_spark_write(
            adapter,
            spec,
            ["sale_id"],
            [],
            Thresholds(),
            "swap",
            store=None,  # type: ignore[arg-type]  # refused before the store is used
            target="nowhere:payouts",
        )

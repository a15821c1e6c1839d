"""A MergeOperator on a Spark connection is built whatever the table: whether it merges (a Delta
table) or is refused (parquet) is known from the catalog at run time (test_spark_delta.py,
test_spark_overwrite.py). No cluster needed."""

from __future__ import annotations

import json

import pytest

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.operators import MergeOperator
from airflow_idempotent.spark import adapter as spark_adapter


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
    assert spark_adapter.conn_type_at_parse("spark_parsed") == "spark_connect"


def test_other_connections_are_not_refused_at_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_PG_PARSED", "postgresql://u@127.0.0.1:5432/db")
    monkeypatch.setenv("AIRFLOW_CONN_BAD_PARSED", "{not json")
    assert merge("pg_parsed").conn_id == "pg_parsed"
    assert merge("bad_parsed").conn_id == "bad_parsed"
    assert spark_adapter.conn_type_at_parse("not_in_the_environment") is None

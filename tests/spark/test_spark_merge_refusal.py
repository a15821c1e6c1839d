"""A MergeOperator on a Spark connection: refused at parse time when the connection is known then,
else first thing in execute, before any connection or Spark session is opened. No cluster needed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_idempotent.adapters import spark as spark_adapter
from airflow_idempotent.errors import UnsupportedConnectionError
from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.operators import MergeOperator
from tests.spark.payouts_spark import DAY, context


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
def test_refused_when_the_dag_is_parsed(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_PARSED", value)
    with pytest.raises(UnsupportedConnectionError, match="PartitionOverwriteOperator") as err:
        merge("spark_parsed")
    assert "MERGE INTO" in str(err.value) and "parquet" in str(err.value)


def test_other_connections_are_not_refused_at_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_PG_PARSED", "postgresql://u@127.0.0.1:5432/db")
    monkeypatch.setenv("AIRFLOW_CONN_BAD_PARSED", "{not json")
    assert merge("pg_parsed").conn_id == "pg_parsed"
    assert merge("bad_parsed").conn_id == "bad_parsed"
    assert spark_adapter.conn_type_at_parse("not_in_the_environment") is None


def test_refused_first_in_execute_before_any_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection known only at run time: built fine, refused before a session is opened."""
    operator = merge("spark_late")  # not in the environment at parse time
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_LATE", json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": 1})
    )
    opened: list[Any] = []
    monkeypatch.setattr(spark_adapter.SparkEngine, "connect", lambda *a, **k: opened.append(a))
    with pytest.raises(UnsupportedConnectionError, match="PartitionOverwriteOperator"):
        operator.execute(context(DAY))  # type: ignore[arg-type]
    assert opened == []

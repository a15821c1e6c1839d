"""A Delta write finds its own commit from the session's last commit read in the table's log
(`delta.session_commit`), not from DESCRIBE HISTORY: what it reads must be what the history says
of that commit (asked here by SQL), another session's later commit must not be taken for it, and
a commit it cannot prove its own (another tag, another table's log) must send it to the history."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from airflow_idempotent.spark import delta
from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkEngine
from tests.spark.payouts_spark import DAY, checksum_at, context, create_payouts, merge_operator, operator

pytestmark = pytest.mark.spark

ADAPTER = SparkAdapter(SparkEngine("sc://unused"))


def tagged_insert(spark: Any, table: str, tag: str, values: str) -> None:
    """An INSERT committed with `tag` as its user metadata, by plain Spark SQL."""
    spark.conf.set(delta.USER_METADATA, tag)
    try:
        spark.sql(f"INSERT INTO {table} VALUES {values}")
    finally:
        spark.conf.unset(delta.USER_METADATA)


def history_row(spark: Any, table: str, tag: str) -> Any:
    return next(r for r in spark.sql(f"DESCRIBE HISTORY {table}").collect() if r["userMetadata"] == tag)


def location(spark: Any, table: str) -> str:
    return str(spark.sql(f"DESCRIBE DETAIL {table}").collect()[0]["location"])


def new_table(spark: Any) -> str:
    table = f"delta_commit_{uuid.uuid4().hex[:8]}"
    create_payouts(spark, table, using="delta")
    return table


def test_the_sessions_commit_is_what_the_history_says_of_it(spark: Any) -> None:
    table = new_table(spark)
    tagged_insert(spark, table, "first", "(1, 1.00, 0.60, DATE'2026-08-01')")
    tag = json.dumps({"airflow_idempotent": {"attempt": "t", "nonce": uuid.uuid4().hex}})
    tagged_insert(spark, table, tag, "(2, 2.00, 0.60, DATE'2026-08-01'), (3, 3.00, 0.60, DATE'2026-08-02')")

    found = delta.session_commit(SparkConnection(spark, "test"), location(spark, table), tag)

    row = history_row(spark, table, tag)
    assert found is not None
    assert found.version == int(row["version"]) == 2  # CREATE is 0, the first INSERT 1
    assert found.read_version == row["readVersion"]
    assert found.operation == row["operation"] == "WRITE"
    assert dict(found.metrics) == dict(row["operationMetrics"])
    assert found.metric("numOutputRows") == 2
    assert found.user_metadata == tag


def test_another_sessions_later_commit_is_not_taken_for_this_one(spark: Any, spark_cluster: Any) -> None:
    table = new_table(spark)
    tag = f"ours-{uuid.uuid4().hex}"
    tagged_insert(spark, table, tag, "(1, 1.00, 0.60, DATE'2026-08-01')")
    other = spark_cluster.session()
    try:
        tagged_insert(other, table, "theirs", "(2, 2.00, 0.60, DATE'2026-08-01')")
    finally:
        other.stop()

    conn = SparkConnection(spark, "test")
    found = delta.session_commit(conn, location(spark, table), tag)

    newest = spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]
    assert newest["userMetadata"] == "theirs"
    assert found is not None and found.version == int(history_row(spark, table, tag)["version"])
    assert found.version == int(newest["version"]) - 1
    assert delta.commit_of(conn, ADAPTER, table, tag, location(spark, table)) == found


def test_a_commit_it_cannot_prove_its_own_sends_it_to_the_history(spark: Any) -> None:
    table, elsewhere = new_table(spark), new_table(spark)
    tag = f"ours-{uuid.uuid4().hex}"
    tagged_insert(spark, table, tag, "(1, 1.00, 0.60, DATE'2026-08-01')")
    conn = SparkConnection(spark, "test")

    assert delta.session_commit(conn, location(spark, table), "another tag") is None
    # the session's last version (1) read in a table whose version 1 does not exist
    assert delta.session_commit(conn, location(spark, elsewhere), tag) is None

    by_history = delta.commit_of(conn, ADAPTER, table, tag, location(spark, elsewhere))
    assert by_history.version == int(history_row(spark, table, tag)["version"])
    assert by_history.user_metadata == tag


@pytest.mark.parametrize("write", ["overwrite", "merge"])
def test_the_operators_find_their_commit_without_the_history(
    spark: Any, spark_conn: str, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    """A first try's write reads no history at all: its version is the commit its tag marks in
    the history (asked after, by SQL), its checksum the window's at that version."""
    table = new_table(spark)

    def no_history(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("DESCRIBE HISTORY read")

    monkeypatch.setattr(delta, "history", no_history)
    made = operator if write == "overwrite" else merge_operator
    result = made(spark_conn, table).execute(context(DAY))
    monkeypatch.undo()

    row = next(
        r
        for r in spark.sql(f"DESCRIBE HISTORY {table}").collect()
        if "airflow_idempotent" in (r["userMetadata"] or "")
    )
    assert result["table_version"] == int(row["version"])
    assert result["row_count"] == 2000
    assert result["checksum"] == checksum_at(spark, table, int(row["version"]), DAY, DAY.replace(day=26))


def test_a_session_without_a_commit_has_none(spark_cluster: Any, spark: Any) -> None:
    table = new_table(spark)
    fresh = spark_cluster.session()
    try:
        assert delta.session_commit(SparkConnection(fresh, "test"), location(spark, table), "x") is None
    finally:
        fresh.stop()

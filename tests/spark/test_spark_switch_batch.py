"""The provider's Spark Connect command (`spark/command`, loaded by the test cluster): a month's
partition locations set in one catalog call. The point is the guarantee: on the test cluster's
Hive metastore (embedded, Derby) the call is one transaction, so a failure part-way through moves
no partition at all; and the switch still works, one SET LOCATION a day, on a server without it."""

from __future__ import annotations

import json
import uuid
from datetime import date, timedelta
from typing import Any

import pytest

from airflow_idempotent.spark import catalog_sql
from airflow_idempotent.spark.adapter import SparkAdapter
from tests.spark import payouts_spark as payouts

pytestmark = pytest.mark.spark

MONTH = [date(2026, 8, 1) + timedelta(days=i) for i in range(31)]


def month_table(spark: Any, table: str) -> dict[str, str]:
    """`table` partitioned by day with 31 days of 10 rows, and a second copy of the month (20 rows
    a day) as plain files under the table's location: {"old": .., "new": ..} directories."""
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (x BIGINT, d DATE) USING parquet PARTITIONED BY (d)")
    rows = "SELECT id AS x, date_add(DATE'2026-08-01', CAST(id % 31 AS INT)) AS d FROM range({n})"
    spark.sql(f"INSERT INTO {table} " + rows.format(n=310))
    described = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    root = next(str(r[1]) for r in described if r[0] == "Location")
    new = f"{root}/_idem_attempts/batch_test"
    spark.sql(rows.format(n=620)).write.partitionBy("d").mode("overwrite").parquet(new)
    return {"new": new}


def locations(spark: Any, table: str) -> dict[date, str]:
    """Each day's location as the catalog gives it (one partition read each)."""
    found = {}
    for day in MONTH:
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table} PARTITION (d = '{day.isoformat()}')").collect()
        found[day] = next(str(r[1]) for r in rows if r[0] == "Location")
    return found


def set_month(spark_conn: str, table: str, where: list[tuple[date, str]]) -> bool:
    adapter = SparkAdapter.from_connection(spark_conn)
    with adapter.engine.connect() as conn:
        return adapter.set_locations(conn, table, "d", where)


def test_one_call_moves_every_partition(spark, spark_conn) -> None:
    table = "batch_moves"
    new = month_table(spark, table)["new"]
    where = [(d, f"{new}/d={d.isoformat()}") for d in MONTH]
    assert set_month(spark_conn, table, where)
    assert locations(spark, table) == dict(where)
    spark.sql(f"REFRESH TABLE {table}")
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 620


def test_one_call_is_all_or_nothing(spark, spark_conn) -> None:
    """30 days moved and the 31st's location longer than the metastore's LOCATION column (4000):
    the metastore fails on the last one, after the 30 others were written in its transaction, and
    rolls them back: every day keeps its location and its rows."""
    table = "batch_atomic"
    new = month_table(spark, table)["new"]
    before = locations(spark, table)
    where = [(d, f"{new}/d={d.isoformat()}") for d in MONTH]
    where[-1] = (MONTH[-1], f"{new}/{'x' * 5000}")
    with pytest.raises(Exception, match="maximum length"):
        set_month(spark_conn, table, where)
    assert locations(spark, table) == before
    spark.sql(f"REFRESH TABLE {table}")
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 310


def test_a_missing_partition_moves_none(spark, spark_conn) -> None:
    table = "batch_missing"
    new = month_table(spark, table)["new"]
    before = locations(spark, table)
    where = [(d, f"{new}/d={d.isoformat()}") for d in MONTH] + [(date(2026, 9, 1), f"{new}/none")]
    with pytest.raises(Exception, match="PARTITIONS_NOT_FOUND"):
        set_month(spark_conn, table, where)
    assert locations(spark, table) == before


def count_set_locations(monkeypatch: pytest.MonkeyPatch) -> list[date]:
    """The days the switch sends a SET LOCATION statement for (a spy: the statement still runs)."""
    sent: list[date] = []
    real = catalog_sql.CatalogStatements.set_location

    def spy(self: Any, table: str, column: str, value: date, location: str) -> str:
        sent.append(value)
        return real(self, table, column, value, location)

    monkeypatch.setattr(catalog_sql.CatalogStatements, "set_location", spy)
    return sent


@pytest.mark.parametrize("loaded", [True, False], ids=["command", "no-command"])
def test_switch_of_a_month_with_and_without_the_command(spark, spark_conn, monkeypatch, loaded) -> None:
    """A month rewritten over existing days: with the command no SET LOCATION is sent; with a
    command name the server does not know (as on a server without the plugin) it answers "no
    handler", nothing moved, and the switch sends one SET LOCATION a day. Either way the month is
    the new one."""
    table = f"payouts_batch_{'on' if loaded else 'off'}"
    payouts.create_payouts(spark, table)
    payouts.insert_month(spark, table, "v1")
    if not loaded:
        monkeypatch.setattr(catalog_sql, "SET_LOCATIONS_COMMAND", "not_a_command")
    sent = count_set_locations(monkeypatch)
    month = payouts.operator(spark_conn, table, granularity="month", parameters={"policy_version": "v2"})
    month.execute(payouts.context(payouts.START))
    days = [payouts.START + timedelta(days=i) for i in range(payouts.DAYS)]
    assert payouts.all_days(spark, table) == {d: payouts.day_truth(d, "v2") for d in days}
    assert sorted(sent) == ([] if loaded else days)


def count_commands(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The provider's Connect commands the client sends, by name (a spy on pyspark's client: the
    command still goes to the server)."""
    from google.protobuf.wrappers_pb2 import StringValue
    from pyspark.sql.connect.client.core import SparkConnectClient

    sent: list[str] = []
    real = SparkConnectClient.execute_command

    def spy(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        if command.HasField("extension"):
            value = StringValue()
            command.extension.Unpack(value)
            sent.append(json.loads(value.value)["airflow_idempotent"])
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(SparkConnectClient, "execute_command", spy)
    return sent


@pytest.mark.parametrize("loaded", [True, False], ids=["command", "no-command"])
def test_a_server_without_the_command_is_asked_once(spark, spark_conn, monkeypatch, loaded) -> None:
    """Two switches of a month through one server: with the command each sends it, once, and no
    SET LOCATION; with a command the server does not have (a name of this test's own, so no other
    test taught the process about it) the first switch asks, is refused and sends a SET LOCATION a
    day, and the second sends those without asking. Either way each month is the one written."""
    table = f"payouts_asked_{'on' if loaded else 'off'}"
    payouts.create_payouts(spark, table)
    payouts.insert_month(spark, table, "v1")
    name = catalog_sql.SET_LOCATIONS_COMMAND if loaded else f"absent_{uuid.uuid4().hex[:12]}"
    monkeypatch.setattr(catalog_sql, "SET_LOCATIONS_COMMAND", name)
    commands = count_commands(monkeypatch)
    sent = count_set_locations(monkeypatch)
    days = [payouts.START + timedelta(days=i) for i in range(payouts.DAYS)]
    for run, policy in enumerate(("v2", "v3")):
        commands.clear()
        sent.clear()
        params = {"policy_version": policy}
        month = payouts.operator(spark_conn, table, granularity="month", parameters=params)
        month.execute(payouts.context(payouts.START))
        assert payouts.all_days(spark, table) == {d: payouts.day_truth(d, policy) for d in days}
        if loaded:
            assert (commands, sent) == ([name], [])
        else:
            assert (commands, sorted(sent)) == ([name] if run == 0 else [], days)

"""Late data on Delta and Iceberg: `lookback=1` rewrites the run's day and the day before in ONE
commit of the table format, and history records each day apart; a parquet table refuses it.

The late data is an earlier day the table holds incomplete (a crashed plain writer's 1,247 rows).
Every expected figure comes from the payouts scenario's formula (payouts_spark.day_truth) or from
SQL written here by hand (payouts_spark.checksum_at), never from the code under test.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_idempotent.errors import UnsupportedConnectionError
from airflow_idempotent.history import HistoryStore
from tests.spark.payouts_spark import (
    DAY,
    PER_DAY,
    checksum_at,
    context,
    create_payouts,
    day_figures,
    day_truth,
    merge_operator,
    operator,
    simulate_crash,
)
from tests.spark.test_spark_delta import create_delta_payouts, version
from tests.spark.test_spark_iceberg import create_iceberg_payouts, snapshots

pytestmark = pytest.mark.spark

LATE, NEXT, EARLIER = DAY - timedelta(days=1), DAY + timedelta(days=1), DAY - timedelta(days=2)


def commits(spark: Any, fmt: str, table: str) -> int:
    """How many commits the table has (Delta versions, Iceberg snapshots), read by hand."""
    return version(spark, table) + 1 if fmt == "delta" else len(snapshots(spark, table))


@pytest.mark.parametrize(("fmt", "strategy"), [("delta", "overwrite"), ("iceberg", "merge")])
def test_lookback_rewrites_the_late_day_in_the_same_commit(
    spark: Any, spark_conn: str, history: HistoryStore, fmt: str, strategy: str
) -> None:
    if fmt == "delta":
        table = f"lookback_{strategy}"
        create_delta_payouts(spark, table)
    else:
        table = create_iceberg_payouts(spark, f"lookback_{strategy}")
    simulate_crash(spark, table, EARLIER, rows=PER_DAY)  # neighbours, written by plain SQL
    simulate_crash(spark, table, NEXT, rows=PER_DAY)
    simulate_crash(spark, table, LATE, rows=1247)  # the day before holds only part of its rows
    neighbours = {d: day_figures(spark, table, d) for d in (EARLIER, NEXT)}
    made = commits(spark, fmt, table)

    build = operator if strategy == "overwrite" else merge_operator
    out = build(spark_conn, table, lookback=1).execute(context(DAY))

    for day in (LATE, DAY):
        rows, total = day_truth(day)
        assert day_figures(spark, table, day) == (rows, rows, total)
    assert {d: day_figures(spark, table, d) for d in (EARLIER, NEXT)} == neighbours
    assert commits(spark, fmt, table) == made + 1  # both days in one commit
    at = out["table_version"]
    assert out["window"] == f"[{LATE}, {NEXT})" and out["lookback"] == 1
    expected = [
        (str(day), before, PER_DAY, checksum_at(spark, table, at, day, day + timedelta(days=1)))
        for day, before in ((LATE, 1247), (DAY, 0))
    ]
    got = [(p["window"], p["rows_before"], p["row_count"], p["checksum"]) for p in out["periods"]]
    assert got == expected
    recorded = sorted(history.writes(target=f"{spark_conn}:{table}"), key=lambda w: w["window_label"])
    assert [(w["window_label"], w["row_count"], w["checksum"]) for w in recorded] == [
        (day, rows, checksum) for day, _, rows, checksum in expected
    ]
    assert all(f"table version {at}" in w["message"] for w in recorded)


def test_lookback_on_a_parquet_table_is_refused_with_nothing_written(
    spark: Any, spark_conn: str, history: HistoryStore
) -> None:
    table = "lookback_parquet"
    create_payouts(spark, table)
    simulate_crash(spark, table, LATE, rows=1247)
    with pytest.raises(UnsupportedConnectionError, match=r"lookback=1 cannot .* it is a parquet table"):
        operator(spark_conn, table, lookback=1).execute(context(DAY))
    assert day_figures(spark, table, LATE)[0] == 1247 and day_figures(spark, table, DAY)[0] == 0
    assert history.writes(target=f"{spark_conn}:{table}") == []

"""Two windows of one Delta or Iceberg table written at the same time, trial after trial: both end
whole, 0 rows lost, 0 duplicated, one commit each.

Each trial resets the two days to a crashed writer's partial rows (1,247 of 2,000), then writes
both at once from two threads (each operator its own Spark Connect session), by overwrite on even
trials and by merge on odd ones. Delta retries an optimistic conflict within the lock timeout and
Iceberg validates from the snapshot it read, so neither may lose the other's commit. `make test`
runs IDEM_SPARK_CONCURRENT_TRIALS=1 trial per format (the property, once); `make reliability` runs
20 and records the figures for RELIABILITY.md. Expected figures from the scenario's formula
(`day_truth`) and SQL written here.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from tests.spark.payouts_spark import (
    DAY,
    PER_DAY,
    checksum_at,
    context,
    day_figures,
    day_truth,
    merge_operator,
    operator,
    simulate_crash,
)
from tests.spark.test_spark_delta import create_delta_payouts
from tests.spark.test_spark_iceberg import create_iceberg_payouts
from tests.spark.test_spark_lookback import commits

pytestmark = pytest.mark.spark

DAYS = (DAY, DAY + timedelta(days=1))
TRIALS = int(os.environ.get("IDEM_SPARK_CONCURRENT_TRIALS", "1"))


@pytest.mark.timeout(120 + 60 * TRIALS, method="thread")  # a trial takes 15-35 s on the test cluster
@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_two_windows_written_at_once_both_end_whole(
    spark: Any, spark_conn: str, reliability: Any, fmt: str
) -> None:
    if fmt == "delta":
        table = "payouts_concurrent_delta"
        create_delta_payouts(spark, table)
    else:
        table = create_iceberg_payouts(spark, "payouts_concurrent")
    broken: list[Any] = []
    seconds: list[float] = []
    lost = dups = 0
    for trial in range(TRIALS):
        spark.sql(f"DELETE FROM {table}")
        for day in DAYS:
            simulate_crash(spark, table, day, rows=1247)
        made = commits(spark, fmt, table)
        build = operator if trial % 2 == 0 else merge_operator
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(build(spark_conn, table).execute, context(day)) for day in DAYS]
            results = [f.result(timeout=300) for f in futures]
        seconds.append(time.monotonic() - began)
        found = {day: day_figures(spark, table, day) for day in DAYS}
        lost += sum(max(0, PER_DAY - k) for _, k, _ in found.values())
        dups += sum(n - k for n, k, _ in found.values())
        expected = {day: (PER_DAY, PER_DAY, day_truth(day)[1]) for day in DAYS}
        versions = sorted(r["table_version"] for r in results)
        whole = found == expected and commits(spark, fmt, table) == made + 2 and len(set(versions)) == 2
        whole = whole and all(
            r["checksum"] == checksum_at(spark, table, r["table_version"], day, day + timedelta(days=1))
            for day, r in zip(DAYS, results, strict=True)
        )
        if not whole:
            broken.append((trial, found, versions))
    reliability.record(
        suite="fault",
        case=f"fault/spark/concurrent_windows_{fmt}",
        database="spark",
        strategy=f"overwrite_{fmt}+merge_{fmt}",
        crash_point="two_windows_at_once",
        reruns=0,
        rows_lost=lost,
        duplicates=dups,
        outcome="ok" if not broken else "broken",
        fault="two_windows_at_once",
        summary=(
            f"two windows of one {fmt} table written at once, {TRIALS} trial(s) (overwrite and merge "
            f"alternating): {TRIALS - len(broken)} whole, one commit each; {lost} rows lost, {dups} "
            f"duplicated; the pair took {min(seconds):.1f}-{max(seconds):.1f} s"
        ),
    )
    assert not broken, broken

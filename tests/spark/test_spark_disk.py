"""Old partition directories and staging tables are cleaned after a successful switch, so disk use
stays bounded over rewrites; what a recorded unfinished switch still needs is kept."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_idempotent.history import HistoryStore, switches
from airflow_idempotent.spark.adapter import SparkAdapter, SparkEngine
from airflow_idempotent.spark.switch import sweep
from tests.spark.payouts_spark import START, all_days, context, create_payouts, day_truth, operator

pytestmark = pytest.mark.spark


def location(spark: Any, table: str) -> Path:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    where = next(str(r[1]) for r in rows if str(r[0]).strip() == "Location")
    return Path(where.split(":", 1)[1] if where.startswith("file:") else where)


def disk(path: Path) -> tuple[int, int]:
    """(bytes, parquet files) under `path`."""
    size = int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout.split()[0])
    return size, len(list(path.rglob("*.parquet")))


def test_disk_use_stays_bounded_over_five_rewrites(spark, spark_conn, reliability) -> None:
    table = "payouts_disk"
    create_payouts(spark, table)
    root = location(spark, table)
    figures = []
    for n in range(5):
        policy = "v2" if n % 2 else "v1"
        operator(spark_conn, table, granularity="day", parameters={"policy_version": policy}).execute(
            context(START)
        )
        figures.append(disk(root))
    assert all_days(spark, table) == {d: day_truth(d, "v1") for d in all_days(spark, table)}
    first_bytes, first_files = figures[0]
    assert all(files == first_files for _, files in figures), figures
    assert all(size <= first_bytes * 1.3 for size, _ in figures), figures
    leftovers = [
        t.name for t in spark.catalog.listTables() if t.name.startswith(("_idem_stg_", "_idem_trash_"))
    ]
    assert leftovers == []
    reliability.record(
        suite="fault",
        case="fault/spark/overwrite_switch/disk_over_five_rewrites",
        database="spark",
        strategy="overwrite_switch",
        outcome="ok",
        fault="disk_over_five_rewrites",
        bytes_after_each=[b for b, _ in figures],
        parquet_files_after_each=[f for _, f in figures],
        summary=f"5 rewrites of a day: table directory {min(b for b, _ in figures)}-"
        f"{max(b for b, _ in figures)} bytes, {first_files} parquet files after each",
    )


def test_sweep_keeps_what_an_unfinished_switch_needs(spark, spark_conn, tmp_path: Path) -> None:
    table = "payouts_sweep"
    create_payouts(spark, table)
    operator(spark_conn, table).execute(context(START))
    root = location(spark, table)
    needed = root / "_idem_attempts" / "live_attempt"
    doomed = root / "_idem_attempts" / "old_attempt"
    for base in (needed, doomed):
        (base / "sale_date=2026-09-01").mkdir(parents=True)
        (base / "sale_date=2026-09-01" / "part-0.parquet").write_bytes(b"x")
    store = HistoryStore.from_airflow()
    target = f"{spark_conn}:{table}"
    at = pendulum.datetime(2026, 9, 1, tz="UTC")
    switches.begin(store, "live_attempt", target, at, at.add(days=1), "s", "_idem_stg_live", str(needed))
    adapter = SparkAdapter.from_connection(spark_conn)
    assert isinstance(adapter.engine, SparkEngine)
    try:
        with adapter.engine.connect() as conn:
            dirs = [f"file:{needed}/sale_date=2026-09-01", f"file:{doomed}/sale_date=2026-09-01"]
            sweep(adapter, conn, store, target, table, "sale_date", "sweeptest", dirs)
        assert (needed / "sale_date=2026-09-01" / "part-0.parquet").exists()
        assert not (doomed / "sale_date=2026-09-01").exists()
        assert all_days(spark, table) == {START: day_truth(START)}
    finally:
        switches.set_status(store, "live_attempt", switches.ABANDONED)

"""Faults of the engine itself: the zombie race (a killed task's statement still running on the
server while its retry runs). After it: every day of the month old or new, 0 rows lost, 0
duplicates, and one rerun gives the month under v2; recorded for RELIABILITY.md (`reliability`).
The SIGKILL of the Spark Connect server mid-switch shares one server restart with Delta's and
Iceberg's cases (`test_spark_table_crash`)."""

from __future__ import annotations

import logging
import re
import subprocess
import time
from pathlib import Path

import pytest

from airflow_idempotent.history import HistoryStore, switches
from tests.spark.payouts_spark import START, all_days, context, create_payouts, insert_month, operator
from tests.spark.test_spark_crash_matrix import V2, go, measure, start_writer

pytestmark = pytest.mark.spark


#: Seconds the zombie's staging SELECT is held on the server (`crash_writer.slow_sql`); its task is
#: SIGKILLed 4 s after sending it.
ZOMBIE_SECONDS = 12


def writer(conn_id: str, table: str, step: str, action: str, slow: float = 0) -> subprocess.Popen[bytes]:
    """The crash writer, importing while the test sets the table up; it writes on `go(proc)`."""
    return start_writer(conn_id, table, step, action, *([f"slow={slow:g}"] if slow else []))


def wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the writer exited {proc.returncode}: {proc.stderr.read()[-3000:]!r}")  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the writer never reached its step"
        time.sleep(0.1)


def end(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The writer's end: its exit status, or SIGKILL after `timeout` s (a client retrying a dead server)."""
    try:
        return f"exited {proc.wait(timeout=timeout)}"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "killed while retrying"


def test_zombie_statement_of_a_killed_attempt_does_not_race_the_retry(
    spark, spark_conn, reliability, caplog: pytest.LogCaptureFixture
) -> None:
    """The killed attempt's slow staging SELECT still runs on the server when the retry starts:
    the retry interrupts it (in the dead attempt's session) before it stages anything, so the
    zombie neither lands staged files nor competes with the retry."""
    table = "payouts_zombie"
    proc = writer(spark_conn, table, "recorded", "after=4", slow=ZOMBIE_SECONDS)
    create_payouts(spark, table)
    insert_month(spark, table, "v1")
    began = time.monotonic()
    go(proc)
    assert proc.wait(timeout=180) == -9, proc.stderr.read()[-3000:]  # type: ignore[union-attr]
    killed_after = time.monotonic() - began
    store = HistoryStore.from_airflow()
    dead = switches.unfinished(store, f"{spark_conn}:{table}")
    assert [p.status for p in dead] == [switches.STAGING]
    with caplog.at_level(logging.INFO, logger="airflow_idempotent.spark.switch"):
        retry_began = time.monotonic()
        result = operator(
            spark_conn, table, granularity="month", parameters={"policy_version": "v2"}
        ).execute(context(START))
        retry_seconds = time.monotonic() - retry_began
    interrupted = [r.getMessage() for r in caplog.records if "interrupted" in r.getMessage()]
    # The staging SELECT, and the target window's count when the kill lands while that read (run
    # beside the staging write on the same session) has not yet ended: 1 or 2, never 0 or more.
    counts = [int(m.split()[1]) for m in interrupted if re.match(r"interrupted \d+ operation", m)]
    assert len(counts) == 1 and counts[0] in (1, 2), interrupted
    assert result["row_count"] == 60000 and all_days(spark, table) == V2
    # had the zombie gone on, its staged files would appear now or never: 3 s after its SELECT's end
    time.sleep(max(3.0, began + ZOMBIE_SECONDS + 3.0 - time.monotonic()))
    zombie = Path(dead[0].location.removeprefix("file:"))
    assert not list(zombie.rglob("*.parquet")), sorted(zombie.rglob("*.parquet"))[:3]
    after = measure(spark, table)
    assert (after["rows_lost"], after["duplicates"], after["new_days"]) == (0, 0, 30)
    reliability.record(
        suite="fault",
        case="fault/spark/overwrite_switch/zombie_statement",
        database="spark",
        strategy="overwrite_switch",
        crash_point="zombie_statement",
        reruns=1,
        rows_lost=after["rows_lost"],
        duplicates=after["duplicates"],
        outcome="ok",
        fault="zombie_statement",
        measured={
            "killed_after_seconds": round(killed_after, 1),
            "retry_seconds": round(retry_seconds, 1),
            "interrupted": interrupted,
        },
        survived=True,
        summary=(
            f"zombie: attempt SIGKILLed {killed_after:.1f} s in, its slow SELECT still running; the retry "
            f"interrupted it and took {retry_seconds:.1f} s; no late staged files"
        ),
    )

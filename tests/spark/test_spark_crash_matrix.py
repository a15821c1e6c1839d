"""SIGKILL of the writing process at each step of the partition switch, then a rerun.

The target holds the month under policy v1 (a plain INSERT, or the operator's write for the
mid-switch case); the killed attempt writes it under v2. Whatever the
crash left, every day of the month is complete under v1 or under v2 (never missing, never mixed,
no duplicate), and one rerun gives the month under v2. Figures from the scenario's formula.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent.spark.switch import STEPS
from tests.spark.payouts_spark import (
    START,
    all_days,
    context,
    create_payouts,
    day_truth,
    insert_month,
    operator,
)

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
MONTH = [START + timedelta(days=n) for n in range(30)]
V1 = {d: day_truth(d, "v1") for d in MONTH}
V2 = {d: day_truth(d, "v2") for d in MONTH}
#: Steps whose v1 month the operator writes (its days then read from an earlier attempt's directory,
#: which the rerun's sweep must delete); the other cases start from a plain INSERT of v1, one write less.
OPERATOR_WRITTEN = ("switched_one",)


def v2(conn_id: str, table: str) -> dict[str, Any]:
    """The rerun: the month under v2, in this process."""
    return operator(conn_id, table, granularity="month", parameters={"policy_version": "v2"}).execute(
        context(START)
    )


def start_writer(conn_id: str, table: str, step: str, *args: str) -> subprocess.Popen[bytes]:
    """The crash writer (month under v2, killed at `step`), started before the test sets its table
    up: it imports Airflow and the provider meanwhile, then waits for `go` (IDEM_WRITER_WAIT)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.spark.crash_writer", conn_id, table, step, "v2", *args],
        cwd=REPO,
        env={**os.environ, "IDEM_WRITER_WAIT": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def go(proc: subprocess.Popen[bytes]) -> None:
    """Let a started writer write."""
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    proc.stdin.close()


def killed_at(proc: subprocess.Popen[bytes]) -> float:
    """Let the writer of `start_writer` write until it is SIGKILLed at its step; its seconds until then.
    Returns a second after the kill: a statement the killed client sent may still finish on the server."""
    began = time.monotonic()
    out, err = proc.communicate(input=b"go\n", timeout=300)
    assert proc.returncode == -9, (proc.returncode, out[-2000:], err[-3000:])
    took = time.monotonic() - began
    time.sleep(1.0)
    return took


def measure(spark: Any, table: str) -> dict[str, Any]:
    """What the table holds: days missing, days neither old nor new, rows lost and duplicated."""
    left = all_days(spark, table)
    rows = spark.sql(f"SELECT count(*) AS n, count(DISTINCT sale_id) AS k FROM {table}").collect()[0]
    return {
        "missing_days": len(set(MONTH) - set(left)),
        "mixed_days": sum(1 for d in MONTH if d in left and left[d] not in (V1[d], V2[d])),
        "new_days": sum(1 for d in MONTH if left.get(d) == V2[d]),
        "rows_lost": max(0, 60000 - int(rows["k"])),
        "duplicates": int(rows["n"]) - int(rows["k"]),
    }


def test_v1_and_v2_differ_on_every_day() -> None:
    assert all(V1[d] != V2[d] for d in MONTH)


#: The steps `make test` kills at: a plan recorded and nothing switched, a window half switched and
#: every partition switched but the plan not closed (the three states a rerun must recover from);
#: the others (before a plan exists, after it is closed) leave nothing to recover and run under
#: `make reliability` (marker `exhaustive`).
RECOVERY_STEPS = ("planned", "switched_one", "switched")


@pytest.mark.parametrize(
    "step", [s if s in RECOVERY_STEPS else pytest.param(s, marks=pytest.mark.exhaustive) for s in STEPS]
)
def test_sigkill_at_each_step_then_rerun(spark, spark_conn, reliability, step: str) -> None:
    table = f"payouts_kill_{step}"
    writer = start_writer(spark_conn, table, step)
    create_payouts(spark, table)
    if step in OPERATOR_WRITTEN:
        operator(spark_conn, table, granularity="month").execute(context(START))
    else:
        insert_month(spark, table, "v1")  # the killed write is a rerun either way
    killed_after = killed_at(writer)
    left = all_days(spark, table)
    measured = measure(spark, table)
    assert set(left) == set(MONTH), f"days missing after SIGKILL at {step}: {sorted(set(MONTH) - set(left))}"
    for day in MONTH:
        assert left[day] in (V1[day], V2[day]), f"day {day} is neither old nor new after SIGKILL at {step}"
    rows = spark.sql(f"SELECT count(*) AS n, count(DISTINCT sale_id) AS k FROM {table}").collect()[0]
    assert rows["n"] == rows["k"] == 60000, f"duplicates or losses after SIGKILL at {step}"
    if step in ("locked", "recorded", "staged", "verified", "planned"):
        assert left == V1, f"SIGKILL at {step}, before any switch, changed the table"
    result = operator(spark_conn, table, granularity="month", parameters={"policy_version": "v2"}).execute(
        context(START)
    )
    after = all_days(spark, table)
    assert after == V2, f"rerun after SIGKILL at {step} did not give the month under v2"
    assert sum(n for n, _ in after.values()) == 60000  # 0 rows lost, 0 duplicates
    assert result["row_count"] == 60000
    rows = spark.sql(f"SELECT count(*) AS n, count(DISTINCT sale_id) AS k FROM {table}").collect()[0]
    assert (rows["n"], rows["k"]) == (60000, 60000)
    reliability.record(
        suite="crash",
        case=f"crash/spark/overwrite_switch/{step}",
        database="spark",
        strategy="overwrite_switch",
        crash_point=step,
        reruns=1,
        rows_lost=60000 - int(rows["k"]),
        duplicates=int(rows["n"]) - int(rows["k"]),
        outcome="ok",
        crashes=[f"SIGKILL at {step} after {killed_after:.1f} s"],
        attempts=["killed", "completed"],
        history_complete=result.get("ordinal") is not None,
        extra_rows=0,
        clean_rows=60000,
        after_crash=measured,
    )


@pytest.mark.parametrize("step", ("switched_one", pytest.param("switched", marks=pytest.mark.exhaustive)))
def test_sigkill_during_a_first_write_then_rerun(spark, spark_conn, step: str) -> None:
    """A first write adds every day in one ALTER TABLE .. ADD: killed after it (or after the whole
    plan), the table holds the month whole under v2 or not at all, and the rerun replays the dead
    attempt's plan (ADD IF NOT EXISTS, then each day's location) before writing the month again."""
    table = f"payouts_first_kill_{step}"
    writer = start_writer(spark_conn, table, step)
    create_payouts(spark, table)
    killed_at(writer)
    left = all_days(spark, table)
    assert set(left) in (set(), set(MONTH)), f"a first write killed at {step} left {len(left)} of 30 days"
    assert all(left[d] == V2[d] for d in left), f"a day is not whole under v2 after SIGKILL at {step}"
    result = v2(spark_conn, table)
    after = all_days(spark, table)
    assert after == V2, f"rerun after SIGKILL at {step} of a first write did not give the month under v2"
    rows = spark.sql(f"SELECT count(*) AS n, count(DISTINCT sale_id) AS k FROM {table}").collect()[0]
    assert (rows["n"], rows["k"]) == (60000, 60000)
    assert result["row_count"] == 60000

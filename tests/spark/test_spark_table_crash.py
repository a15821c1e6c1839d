"""Crashes of a Delta or Iceberg write, then a rerun: the window old or new, never half, 0 lost, 0 duplicated.

Each case kills the month's overwrite (v1 -> v2, 60,000 rows) of a Delta table and of an Iceberg
table at once, both writers started together so the pair costs one case's time: SIGKILL of the
task right after its commit landed (nothing recorded yet), SIGKILL while its commit statement runs
in the cluster (a slow SELECT keeps it there), and SIGKILL of the Spark Connect server during the
commit. After each, every day of the month is whole under v1 or under v2 and one rerun gives the
month under v2. Figures from the scenario's formula (`day_truth`) and SQL written here; each
case is recorded for RELIABILITY.md (`reliability`).
"""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.spark.payouts_spark import START, context, create_payouts, insert_month, operator
from tests.spark.test_spark_crash_matrix import V1, V2, go, measure, start_writer
from tests.spark.test_spark_delta import create_delta_payouts
from tests.spark.test_spark_faults import end, wait_for
from tests.spark.test_spark_iceberg import create_iceberg_payouts, ice

pytestmark = pytest.mark.spark

FORMATS = ("delta", "iceberg")
#: Each format's write as RELIABILITY.md names it (parquet's is the partition switch).
STRATEGY = {"parquet": "overwrite_switch", "delta": "overwrite_delta", "iceberg": "overwrite_iceberg"}
WHOLE = {"missing_days": 0, "mixed_days": 0, "rows_lost": 0, "duplicates": 0}


def whole(measured: dict[str, Any]) -> bool:
    """No day missing or mixed, no row lost or duplicated."""
    return all(measured[k] == v for k, v in WHOLE.items())


def names(case: str) -> dict[str, str]:
    """The case's Delta and Iceberg tables (the writers are started with them, before they exist)."""
    return {"delta": f"payouts_crash_{case}", "iceberg": ice(f"payouts_crash_{case}")}


def tables(spark: Any, case: str) -> dict[str, str]:
    """A Delta and an Iceberg payouts table for `case`, each holding the month under v1."""
    made = names(case)
    create_delta_payouts(spark, made["delta"])
    create_iceberg_payouts(spark, f"payouts_crash_{case}")
    for table in made.values():
        insert_month(spark, table, "v1")
    return made


def rerun(conn_id: str, table: str) -> dict[str, Any]:
    return operator(conn_id, table, granularity="month", parameters={"policy_version": "v2"}).execute(
        context(START)
    )


def record(reliability: Any, suite: str, point: str, fmt: str, left: dict[str, Any], after: dict[str, Any],
           note: str, recorded: bool) -> None:  # fmt: skip
    reliability.record(
        suite=suite,
        case=f"{suite}/spark/{STRATEGY[fmt]}/{point}",
        database="spark",
        strategy=STRATEGY[fmt],
        crash_point=point,
        reruns=1,
        rows_lost=left["rows_lost"] + after["rows_lost"],
        duplicates=left["duplicates"] + after["duplicates"],
        outcome="ok"
        if {**left, **WHOLE} == left and {**after, **WHOLE, "new_days": 30} == after
        else "broken",
        crashes=[note],
        attempts=["killed", "completed"],
        after_crash=left,
        history_complete=recorded,
        summary=(  # the fault table's line (RELIABILITY.md)
            f"{point} ({fmt}): {note}; after it {left['new_days']} new and {30 - left['new_days']} old "
            f"days, {left['missing_days']} missing, {left['mixed_days']} mixed; one rerun: the month under v2"
        ),
    )


def run_together(writers: dict[str, subprocess.Popen[bytes]]) -> dict[str, tuple[int, bytes]]:
    """Let every writer go at once, then read each one's output to its end: exit code, stderr."""
    for proc in writers.values():
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    done = {}
    for fmt, proc in writers.items():
        _, err = proc.communicate(timeout=300)
        done[fmt] = (proc.returncode, err)
    return done


def check_then_rerun(spark: Any, conn_id: str, made: dict[str, str]) -> dict[str, tuple[dict, dict, bool]]:
    """What each table holds after the crash (asserted whole, every table read before any rerun),
    then one rerun of each, then what each holds (asserted v2), and whether the rerun's write was
    recorded. The reruns run at once, each operator in its own thread and Spark Connect session as
    test_spark_concurrency runs two: they share no table, and one's executors work while
    another's driver plans, so the formats' reruns cost about the slowest one's time, not the sum."""
    left = {fmt: measure(spark, table) for fmt, table in made.items()}
    for fmt, measured in left.items():
        assert whole(measured), (fmt, measured)
    with ThreadPoolExecutor(max_workers=len(made)) as pool:
        futures = {fmt: pool.submit(rerun, conn_id, table) for fmt, table in made.items()}
        results = {fmt: future.result(timeout=300) for fmt, future in futures.items()}
    out = {}
    for fmt, table in made.items():
        assert results[fmt]["row_count"] == 60000, fmt
        after = measure(spark, table)
        assert after == {**WHOLE, "new_days": 30}, (fmt, after)
        out[fmt] = (left[fmt], after, results[fmt].get("ordinal") is not None)
    return out


#: Seconds the commit statement of the kill during the commit is held on the server (`slow_sql`):
#: the task is SIGKILLed 4 s after it sent it, so the kill lands with 8 s to spare.
DURING_COMMIT = 12


@pytest.mark.parametrize(("point", "step", "action", "slow"), [
    ("sigkill_after_commit", "committed", "kill", 0),
    ("sigkill_during_commit", "checked", "after=4", DURING_COMMIT),
])  # fmt: skip
def test_sigkill_of_the_task_around_the_commit_then_rerun(
    spark, spark_conn, reliability, point: str, step: str, action: str, slow: int
) -> None:
    extra = [f"slow={slow}"] if slow else []
    writers = {fmt: start_writer(spark_conn, t, step, action, *extra) for fmt, t in names(point).items()}
    made = tables(spark, point)  # while the writers import Airflow and the provider
    for fmt, (code, err) in run_together(writers).items():
        assert code == -9, (fmt, code, err[-3000:])
    time.sleep(1.0)  # a statement the killed client sent may still be finishing on the server
    if step == "committed":  # the commit landed before the kill: the month is v2, not yet recorded
        assert all(measure(spark, t)["new_days"] == 30 for t in made.values())
    for fmt, (left, after, recorded) in check_then_rerun(spark, spark_conn, made).items():
        record(reliability, "crash", point, fmt, left, after, f"SIGKILL at {step} ({action})", recorded)


#: Where the one server kill catches each format's writer: parquet's partition switch paused after
#: its first day (the point where a dead server could leave a window half switched), Delta's and
#: Iceberg's commit statements running (a SELECT held 60 s keeps them on the server until the kill,
#: which comes a second after the later of the two reached its commit).
SERVER_KILL = {
    "parquet": ("server_sigkill_mid_switch", "switched_one", "pause", ()),
    "delta": ("server_sigkill_during_commit", "checked", "mark", ("slow=60",)),
    "iceberg": ("server_sigkill_during_commit", "checked", "mark", ("slow=60",)),
}


@pytest.mark.restarts_connect
def test_connect_server_sigkill_during_the_write_then_rerun(
    spark_cluster, spark_conn, tmp_path: Path, reliability
) -> None:
    """ONE SIGKILL of the Connect server, with a parquet, a Delta and an Iceberg writer each at its
    point (SERVER_KILL), costs one restart for the three cases; then each table is checked and
    rerun."""
    if not spark_cluster.daemons:
        pytest.skip("attached to a cluster this session does not own: its server cannot be restarted")
    markers = {fmt: tmp_path / f"reached_{fmt}" for fmt in SERVER_KILL}
    made = {"parquet": "payouts_server_kill", **names("server")}
    writers: dict[str, subprocess.Popen[bytes]] = {
        fmt: start_writer(spark_conn, made[fmt], step, f"{action}={markers[fmt]}", *extra)
        for fmt, (_, step, action, extra) in SERVER_KILL.items()
    }
    client = spark_cluster.session()
    tables(client, "server")
    create_payouts(client, made["parquet"])
    insert_month(client, made["parquet"], "v1")
    client.stop()
    # parquet's switch first: it stages and verifies the month before its first day is switched,
    # while a table format reaches its commit in seconds, so started together Iceberg's commit had
    # landed before the kill; the switch pauses 20 s at its point, time for the others to reach theirs
    go(writers["parquet"])  # the test kills the server while they run: their output is read after
    wait_for(markers["parquet"], writers["parquet"])
    for fmt in FORMATS:
        go(writers[fmt])
    for fmt in FORMATS:
        wait_for(markers[fmt], writers[fmt])
    time.sleep(1.0)  # the commit statements are on the server, the switch is paused
    spark_cluster.kill_connect()
    killed = time.monotonic()  # each writer gets the same 2 s from the kill to end by itself
    ended = {fmt: end(proc, timeout=max(0.0, killed + 2 - time.monotonic())) for fmt, proc in writers.items()}
    restart = spark_cluster.start_connect()
    fresh = spark_cluster.session()
    try:
        results = check_then_rerun(fresh, spark_conn, made)
    finally:
        fresh.stop()
    for fmt, (left, after, recorded) in results.items():
        point = SERVER_KILL[fmt][0]
        note = f"Connect server SIGKILL ({point}), restarted in {restart:.1f} s; writer {ended[fmt]}"
        record(reliability, "fault", point, fmt, left, after, note, recorded)
    assert all(left["new_days"] in (0, 30) for fmt, (left, _, _) in results.items() if fmt != "parquet")
    assert V1 != V2

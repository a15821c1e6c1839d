#!/usr/bin/env python
"""Where a Delta merge's `counted` step goes (issue #30): the commit found by its tag, then the
window's count and checksum read at its version.

    python bench/probe_delta_counted.py [--runs 3] [--rows N] [--variants a,b,..]

Starts one cluster as bench_delta.py does (`plugin`, its 1,000,000-row window over a 3,000,000-row
source), the driver's UI on (its REST API gives each SQL execution's jobs and stages), and runs
`MergeOperator.execute` on the window, its history lookup and window figures timed apart, with
each SQL execution of the `counted` step listed; then, after a bare MERGE each (a new commit,
so nothing of the read is cached), the step's parts one at a time (`VARIANTS`). Prints the files
the MERGE wrote (its metrics, DESCRIBE DETAIL) and each variant's median.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_delta import BARE_MERGE, TARGET_DDL, WINDOW_START, source_sql  # noqa: E402
from bench_spark import WINDOW_SQL  # noqa: E402
from probe_delta_observe import rest  # noqa: E402
from scratch import scratch_dir  # noqa: E402

from airflow_idempotent.operators import MergeOperator  # noqa: E402
from airflow_idempotent.spark import delta, steps  # noqa: E402
from airflow_idempotent.spark.cluster import DELTA_CONF, SPARK_JARS_DIR, SparkCluster, delta_jars  # noqa: E402
from airflow_idempotent.testing.ports import free_port  # noqa: E402

TABLE = "bench_delta_bare_merge"
OP_TABLE = "probe_merge_op"
WINDOW = "sale_date >= DATE'2026-08-01' AND sale_date < DATE'2026-09-01'"
CHECKSUM = (
    "SELECT COUNT(*), COALESCE(SUM(CAST(XXHASH64(amount_eur, rate, sale_date, sale_id, "
    "CAST(IF(amount_eur IS NULL, 1, 0) + IF(rate IS NULL, 2, 0) + IF(sale_date IS NULL, 4, 0) "
    "+ IF(sale_id IS NULL, 8, 0) AS BIGINT))"
    f" AS DECIMAL(38, 0))), 0) FROM {TABLE}{{at}} WHERE {WINDOW}"
)
_HASH = (
    "XXHASH64(amount_eur, rate, sale_date, sale_id, CAST(IF(amount_eur IS NULL, 1, 0) + "
    "IF(rate IS NULL, 2, 0) + IF(sale_date IS NULL, 4, 0) + IF(sale_id IS NULL, 8, 0) AS BIGINT))"
)
#: CHECKSUM's sum as the adapter takes it since it stopped casting each hash to DECIMAL(38,0):
#: three BIGINT sums of 21/21/22-bit slices, combined once (`SparkAdapter.hash_total`)
CHECKSUM_SLICED = (
    f"SELECT COUNT(*), COALESCE((CAST(SUM(SHIFTRIGHT({_HASH}, 42)) AS DECIMAL(38, 0)) * 2097152 + "
    f"SUM(SHIFTRIGHT({_HASH}, 21) & 2097151)) * 2097152 + SUM({_HASH} & 2097151), 0) "
    f"FROM {TABLE}{{at}} WHERE {WINDOW}"
)

HISTORY5 = f"DESCRIBE HISTORY {TABLE} LIMIT 5"
#: the latest snapshot's window files listed, nothing read: its state built
LATEST_FILES = f"SELECT 1 FROM {TABLE} WHERE {WINDOW} LIMIT 1"


def variants(spark: Any) -> dict[str, Any]:
    """Each a function of the new commit's version: one part of `counted`, or an alternative."""

    def q(sql: str) -> Any:
        return lambda v: spark.sql(sql.format(at=f" VERSION AS OF {v}", v=v)).collect()

    return {
        "history5": lambda v: spark.sql(f"DESCRIBE HISTORY {TABLE} LIMIT 5").collect(),
        "history1": lambda v: spark.sql(f"DESCRIBE HISTORY {TABLE} LIMIT 1").collect(),
        "checksum_at": q(CHECKSUM),
        "checksum_at_sliced": q(CHECKSUM_SLICED),
        "checksum_latest": lambda v: spark.sql(CHECKSUM.format(at="")).collect(),
        "count_at": q(f"SELECT count(*) FROM {TABLE}{{at}} WHERE {WINDOW}"),
        "history5+checksum_at": lambda v: (
            spark.sql(f"DESCRIBE HISTORY {TABLE} LIMIT 5").collect(),
            spark.sql(CHECKSUM.format(at=f" VERSION AS OF {v}")).collect(),
        ),
        "detail": lambda v: spark.sql(f"DESCRIBE DETAIL {TABLE}").collect(),
        "checksum_at_twice": lambda v: [q(CHECKSUM)(v) for _ in range(2)],
        "latest_then_at": lambda v: (q(LATEST_FILES)(v), q(CHECKSUM)(v)),
        "history5||latest;then_at": lambda v: (together(q(HISTORY5), q(LATEST_FILES))(v), q(CHECKSUM)(v)),
        "history5||checksum_at": together(q(HISTORY5), q(CHECKSUM)),
        "checksum_latest_twice": lambda v: [spark.sql(CHECKSUM.format(at="")).collect() for _ in range(2)],
        # the proposed order: the window read at the latest version, then the newest commit checked
        "checksum_latest+history1": lambda v: (
            spark.sql(CHECKSUM.format(at="")).collect(),
            spark.sql(f"DESCRIBE HISTORY {TABLE} LIMIT 1").collect(),
        ),
    }


def together(*runs: Any) -> Any:
    """`runs` at once, each in a thread of its own (Spark Connect runs a session's executions
    concurrently)."""
    from concurrent.futures import ThreadPoolExecutor

    def run(v: int) -> list[Any]:
        with ThreadPoolExecutor(len(runs)) as pool:
            return [f.result() for f in [pool.submit(r, v) for r in runs]]

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--variants", help="comma-separated variant names (default all)")
    parser.add_argument("--conf", action="append", default=[], help="k=v set on the probe's session")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        work = scratch_dir("idem_probe_counted_")
        conf = dict(DELTA_CONF)
        ui_port = free_port()
        conf.update({"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)})
        jars = delta_jars(os.environ.get("IDEM_SPARK_JARS") or ROOT / SPARK_JARS_DIR)
        t0 = time.monotonic()
        cluster = SparkCluster.start(work / "spark", extra_conf=conf, jars=jars, connect_mode="plugin")
        print(f"cluster started in {time.monotonic() - t0:.1f} s; UI :{ui_port}", flush=True)
        stack.callback(cluster.stop)
        spark = cluster.session()
        stack.callback(spark.stop)
        for kv in args.conf:
            k, v = kv.split("=", 1)
            spark.conf.set(k, v)
        ui = f"http://127.0.0.1:{ui_port}"
        app = rest(ui, "/applications")[0]["id"]
        spark.sql(source_sql(args.rows))
        for name in (TABLE, OP_TABLE):
            spark.sql(f"DROP TABLE IF EXISTS {name}")
            spark.sql(TARGET_DDL.format(name=name))
        os.environ["AIRFLOW_CONN_BENCH_SPARK"] = json.dumps(
            {"conn_type": "spark_connect", "host": "127.0.0.1", "port": cluster.connect_port}
        )
        os.environ["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = json.dumps(
            {"conn_type": "sqlite", "host": str(work / "history.db")}
        )
        op = MergeOperator(
            task_id="probe_merge",
            table=OP_TABLE,
            conn_id="bench_spark",
            partition_column="sale_date",
            sql=WINDOW_SQL,
            granularity="month",
            key_columns=["sale_id"],
            emit_asset=False,
        )
        context = dict.fromkeys(("logical_date", "data_interval_start", "data_interval_end"), WINDOW_START)
        parts: dict[str, list[float]] = {}

        def timing(name: str, fn: Any) -> Any:
            def wrapped(*a: Any, **kw: Any) -> Any:
                t = time.perf_counter()
                try:
                    return fn(*a, **kw)
                finally:
                    parts.setdefault(name, []).append(time.perf_counter() - t)

            return wrapped

        delta.commit_of = timing("op: commit_of", delta.commit_of)
        delta.window_stats = timing("op: window_stats", delta.window_stats)
        marks: dict[str, float] = {}
        steps.step_hook = lambda name: marks.__setitem__(name, time.perf_counter())

        def sql_ids() -> set[int]:
            return {e["id"] for e in rest(ui, f"/applications/{app}/sql?length=100000")}

        spark.sql(BARE_MERGE).collect()  # warm-up: the window written, executors started
        op.execute(context)
        op.execute(context)
        chosen = variants(spark)
        if args.variants:
            chosen = {k: v for k, v in chosen.items() if k in args.variants.split(",")}
        times: dict[str, list[float]] = {k: [] for k in chosen}
        counted_ids: list[int] = []
        for i in range(args.runs):
            before = sql_ids()
            t = time.perf_counter()
            op.execute(context)
            total = time.perf_counter() - t
            counted = marks["counted"] - marks["committed"]
            committed = marks["committed"] - marks["checked"]
            parts.setdefault("op: committed", []).append(committed)
            parts.setdefault("op: counted", []).append(counted)
            new = sorted(sql_ids() - before)
            counted_ids = new
            print(
                f"run {i} operator {total:.2f} s committed {committed:.2f} counted {counted:.2f} "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            order = list(chosen.items())
            for name, run in order[i % len(order) :] + order[: i % len(order)]:
                t = time.perf_counter()
                spark.sql(BARE_MERGE).collect()
                merged = time.perf_counter() - t
                version = spark.sql(f"DESCRIBE HISTORY {TABLE} LIMIT 1").collect()[0]["version"]
                t = time.perf_counter()
                run(version)
                times[name].append(time.perf_counter() - t)
                print(f"  bare merge {merged:.2f} s, then {name} {times[name][-1]:.2f} s", flush=True)
        print("\nmedians:")
        for name, v in {**parts, **times}.items():
            print(f"  {name:28s} {statistics.median(v):6.2f} s  ({', '.join(f'{x:.2f}' for x in v)})")
        for name in (OP_TABLE, TABLE):
            last = spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").collect()[0]
            detail = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]
            print(f"\n{name}: numFiles {detail['numFiles']} size {detail['sizeInBytes']}")
            print(f"  last commit {last['version']} {last['operation']}: {dict(last['operationMetrics'])}")
        print("\nthe operator's last run, its SQL executions:")
        all_sql = rest(ui, f"/applications/{app}/sql?length=100000&details=true&planDescription=true")
        stages = {s["stageId"]: s for s in rest(ui, f"/applications/{app}/stages")}
        jobs = {j["jobId"]: j for j in rest(ui, f"/applications/{app}/jobs")}
        for e in all_sql:
            if e["id"] not in counted_ids:
                continue
            js = e.get("successJobIds", []) + e.get("failedJobIds", [])
            print(f"  sql {e['id']} {e['duration'] / 1000:.2f} s jobs {js}: {e['description'][:100]}")
            for j in js:
                for s in jobs.get(j, {}).get("stageIds", []):
                    if s in stages:
                        st = stages[s]
                        print(
                            f"     stage {s}: {st['numTasks']} tasks, "
                            f"{st.get('executorRunTime', 0) / 1000:.2f} s run, "
                            f"in {st.get('inputRecords', 0)} rows {st.get('inputBytes', 0)} B, "
                            f"{st['name'][:70]}"
                        )
            if args.explain and e["duration"] > 200:
                print(e.get("planDescription", "")[:5000])


if __name__ == "__main__":
    main()

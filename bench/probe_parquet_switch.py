#!/usr/bin/env python
"""Where the parquet partition switch's time goes (issue #30 item 3): each step's SQL executions.

    python bench/probe_parquet_switch.py CLUSTER_DIR UI_PORT [--runs 3]

Attaches to a cluster started with the driver's UI on (``SparkCluster.start(dir,
extra_conf={"spark.ui.enabled": "true", "spark.ui.port": UI_PORT})``), makes bench_spark.py's source
and target, runs ``PartitionOverwriteOperator.execute`` over its 1,000,000-row window (one warm-up,
then ``--runs``), and prints per step of the switch the SQL executions that began in it (the REST
API's duration, jobs, tasks, rows read and the statement's text), so a step's seconds split into
Spark's work and the round trips and history writes around it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_spark import PER_DAY, SOURCE_SQL, TARGET_DDL, bench_operator, window_context  # noqa: E402
from scratch import scratch_dir  # noqa: E402

from airflow_idempotent.spark import steps  # noqa: E402
from airflow_idempotent.spark.cluster import SparkCluster  # noqa: E402


def rest(ui: str, path: str) -> Any:
    with urllib.request.urlopen(f"{ui}/api/v1{path}", timeout=30) as r:
        return json.loads(r.read())


def epoch(stamp: str) -> float:
    """The REST API's ``2026-12-05T11:56:00.123GMT`` as seconds since the epoch."""
    return datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def text(execution: dict[str, Any]) -> str:
    """What an execution ran: the first node of its physical plan (a command's class and arguments)."""
    plan = execution.get("planDescription", "")
    head = plan.split("== Physical Plan ==", 1)[-1].strip().splitlines()
    return re.sub(r"\s+", " ", head[0] if head else execution["description"])[:170]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cluster_dir")
    parser.add_argument("ui_port")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = scratch_dir("idem_probe_pq_")
    cluster = SparkCluster.attach(args.cluster_dir)
    ui = f"http://127.0.0.1:{args.ui_port}"
    app = rest(ui, "/applications")[0]["id"]
    os.environ["AIRFLOW_CONN_BENCH_SPARK"] = json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": cluster.connect_port}
    )
    os.environ["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = json.dumps(
        {"conn_type": "sqlite", "host": str(work / "history.db")}
    )
    spark = cluster.session()
    try:
        spark.sql("DROP TABLE IF EXISTS bench_sales")
        spark.sql("DROP TABLE IF EXISTS bench_op")
        spark.sql(SOURCE_SQL)
        spark.sql(TARGET_DDL.format(name="bench_op"))
        operator = bench_operator("bench_op")
        context = window_context()
        marks: list[tuple[str, float]] = []
        steps.step_hook = lambda name: marks.append((name, time.time()))
        for run in range(args.runs + 1):
            before = {e["id"] for e in rest(ui, f"/applications/{app}/sql?length=100000")}
            marks.clear()
            marks.append(("start", time.time()))
            result = operator.execute(context)  # type: ignore[arg-type]
            marks.append(("end", time.time()))
            assert result["row_count"] == 31 * PER_DAY, result
            time.sleep(1.0)  # the listener's last events
            listed = rest(ui, f"/applications/{app}/sql?length=100000&details=true&planDescription=true")
            new = [e for e in listed if e["id"] not in before]
            jobs = {j["jobId"]: j for j in rest(ui, f"/applications/{app}/jobs?status=succeeded")}
            print(f"\n=== run {run} ({'warm-up' if run == 0 else 'measured'}), load {os.getloadavg()}")
            for (_, a), (name, b) in itertools.pairwise(marks):
                inside = [e for e in new if a <= epoch(e["submissionTime"]) < b]
                spark_s = sum(e["duration"] for e in inside) / 1000
                print(f"{name:10s} {b - a:5.2f} s, {len(inside)} SQL execution(s) {spark_s:.2f} s")
                for e in sorted(inside, key=lambda e: e["id"]):
                    js = e.get("successJobIds", [])
                    tasks = sum(jobs[j]["numTasks"] for j in js if j in jobs)
                    print(f"    {e['duration'] / 1000:5.2f} s jobs {len(js)} tasks {tasks}: {text(e)}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()

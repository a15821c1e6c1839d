#!/usr/bin/env python
"""How a Delta overwrite can find its own commit cheaper than DESCRIBE HISTORY (issue #30).

    python bench/probe_delta_commit.py [--runs 9] [--rows 1000000]

Starts one cluster as bench_delta.py does (`plugin`), writes the window of a Delta table with
``writeTo(t).overwrite(<window>)`` tagged by its ``userMetadata`` option as the operator does, and
after each commit times, in turn (each run starting one variant later), the ways to learn the
commit's version, read version, metrics and tag: ``DESCRIBE HISTORY .. LIMIT 5`` and ``LIMIT 1``,
the session's ``lastCommitVersionInSession`` conf, and the commit's JSON file read as text.
Prints each variant's median and checks that every variant reads the same commit.
"""

from __future__ import annotations

import argparse
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

from bench_delta import TARGET_DDL, source_sql  # noqa: E402
from bench_spark import WINDOW_SQL  # noqa: E402
from scratch import scratch_dir  # noqa: E402

from airflow_idempotent.spark.cluster import DELTA_CONF, SPARK_JARS_DIR, SparkCluster, delta_jars  # noqa: E402

TABLE = "probe_commit"
WINDOW = "sale_date >= DATE'2026-08-01' AND sale_date < DATE'2026-09-01'"
LAST = "spark.databricks.delta.lastCommitVersionInSession"


def variants(spark: Any, location: str) -> dict[str, Any]:
    def hist(limit: int) -> Any:
        def run() -> Any:
            r = spark.sql(f"DESCRIBE HISTORY {TABLE} LIMIT {limit}").collect()[0]
            return (int(r["version"]), r["userMetadata"], dict(r["operationMetrics"] or {}))

        return run

    def conf() -> Any:
        return int(spark.conf.get(LAST))

    def text() -> Any:
        version = int(spark.conf.get(LAST))
        path = f"{location}/_delta_log/{version:020d}.json"
        for (line,) in spark.read.text(path).collect():
            if line.startswith('{"commitInfo"'):
                info = json.loads(line)["commitInfo"]
                return (version, info.get("userMetadata"), info.get("operationMetrics"))
        return None

    def text_sql() -> Any:
        version = int(spark.conf.get(LAST))
        path = f"{location}/_delta_log/{version:020d}.json"
        rows = spark.sql(
            f"SELECT value FROM text.`{path}` WHERE startswith(value, '{{\"commitInfo\"')"
        ).collect()
        info = json.loads(rows[0][0])["commitInfo"]
        return (version, info.get("userMetadata"), info.get("operationMetrics"))

    return {"history5": hist(5), "history1": hist(1), "conf": conf, "text": text, "text_sql": text_sql}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with scratch_dir("probe-commit") as work:
        jars = delta_jars(os.environ.get("IDEM_SPARK_JARS") or ROOT / SPARK_JARS_DIR)
        cluster = SparkCluster.start(work / "spark", extra_conf=DELTA_CONF, jars=jars, connect_mode="plugin")
        try:
            spark = cluster.session()
            spark.sql(source_sql(args.rows))  # bench_sales
            spark.sql(TARGET_DDL.format(name=TABLE))
            location = spark.sql(f"DESCRIBE DETAIL {TABLE}").collect()[0]["location"]
            window = spark.sql(
                WINDOW_SQL.replace(":window_start", "DATE'2026-08-01'").replace(
                    ":window_end", "DATE'2026-09-01'"
                )
            )
            from pyspark.sql import functions as F

            ways = variants(spark, location)
            times: dict[str, list[float]] = {k: [] for k in ways}
            order = list(ways)
            for run in range(args.runs + 1):
                tag = json.dumps({"probe": run})
                window.writeTo(TABLE).option("userMetadata", tag).overwrite(F.expr(WINDOW))
                seen = {}
                shift = run % len(order)
                for name in order[shift:] + order[:shift]:
                    t = time.perf_counter()
                    seen[name] = ways[name]()
                    if run:  # the first is a warm-up
                        times[name].append(time.perf_counter() - t)
                version = seen["conf"]
                for name in ("history5", "history1", "text", "text_sql"):
                    assert seen[name][0] == version and seen[name][1] == tag, (name, seen[name], version, tag)
                print(run, version, {k: round(v[-1] * 1000) for k, v in times.items() if v}, flush=True)
            print("metrics:", seen["text"][2])
            print("history metrics:", seen["history1"][2])
            for name, values in times.items():
                print(
                    f"{name}: median {statistics.median(values) * 1000:.0f} ms "
                    f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f})"
                )
            print("load", os.getloadavg())
            spark.stop()
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()

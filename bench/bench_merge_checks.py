#!/usr/bin/env python
"""A merge's source checks on Spark: two queries (`check_keys`, `raise_held_outside`) against one
(`check_merge_source`), alternating in one session of one cluster (so the machine's load weighs on
both alike), on the 1,000,000-row window of bench_delta.py.

Run on demand: ``python bench/bench_merge_checks.py --format delta|iceberg --runs 5``; it prints
the medians and the one query's plan (EXPLAIN FORMATTED). Results go by hand into
bench/results/merge-checks.md, with the load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from datetime import date
from pathlib import Path

from scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_idempotent import strategies, write_spec  # noqa: E402
from airflow_idempotent.lint import check_deterministic  # noqa: E402
from airflow_idempotent.spark import merges  # noqa: E402
from airflow_idempotent.spark.adapter import SparkAdapter, inline_params  # noqa: E402
from airflow_idempotent.spark.cluster import (  # noqa: E402
    DELTA_CONF,
    SPARK_JARS_DIR,
    SparkCluster,
    delta_jars,
    iceberg_conf,
)
from airflow_idempotent.window import day_range  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from bench_delta import ICE, LITERAL_SQL, TARGET_DDL, catalog_database, named  # noqa: E402
from bench_spark import SOURCE_SQL, WINDOW_SQL  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--format", choices=("delta", "iceberg"), default="delta")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    work = scratch_dir("idem_bench_checks_")
    with contextlib.ExitStack() as stack:
        conf = dict(DELTA_CONF)
        if args.format == "iceberg":
            conf.update(iceberg_conf(stack.enter_context(catalog_database()), "postgres", work / "iceberg"))
        jars = delta_jars(os.environ.get("IDEM_SPARK_JARS") or ROOT / SPARK_JARS_DIR)
        cluster = SparkCluster.start(work / "spark", extra_conf=conf, jars=jars)
        stack.callback(cluster.stop)
        spark = cluster.session()
        stack.callback(spark.stop)
        table = f"{ICE if args.format == 'iceberg' else ''}bench_checks_merge"
        if args.format == "iceberg":
            spark.sql("CREATE NAMESPACE IF NOT EXISTS ice.bench")
        spark.sql("DROP TABLE IF EXISTS bench_sales")
        spark.sql(SOURCE_SQL)
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(named(TARGET_DDL.format(name=table), args.format))
        spark.sql(f"INSERT INTO {table} {LITERAL_SQL}")  # the window, as a rerun finds it
        os.environ["AIRFLOW_CONN_BENCH_CHECKS"] = json.dumps(
            {"conn_type": "spark_connect", "host": "127.0.0.1", "port": cluster.connect_port}
        )
        adapter = SparkAdapter.from_connection("bench_checks")
        window = day_range(date(2026, 8, 1), date(2026, 8, 31))
        query = check_deterministic(WINDOW_SQL, "spark")
        spec = write_spec.WriteSpec(table, query, window, "sale_date")
        keys = ["sale_id"]
        with adapter.engine.connect() as conn:
            info, _, params = strategies.prepare(adapter, conn, spec)  # type: ignore[arg-type]

            def two() -> None:
                strategies.check_keys(adapter, conn, spec, keys, params)  # type: ignore[arg-type]
                strategies.raise_held_outside(adapter, conn, spec, info, keys, params, moving=True)  # type: ignore[arg-type]

            def one() -> None:
                merges.check_merge_source(adapter, conn, spec, keys=keys, info=info, params=params)  # type: ignore[arg-type]

            paths = {"two queries (before)": two, "one query (check_merge_source)": one}
            times: dict[str, list[float]] = {name: [] for name in paths}
            for run in paths.values():  # warm-up
                run()
            for _ in range(args.runs):
                for name, run in paths.items():
                    began = time.perf_counter()
                    run()
                    times[name].append(time.perf_counter() - began)
            print(f"{args.format}, load average {[round(x, 2) for x in os.getloadavg()]} at the end")
            for name, values in times.items():
                runs = ", ".join(f"{v:.2f}" for v in values)
                print(f"| {name} | {statistics.median(values):.2f} | {runs} |")
            problems = adapter.merge_source_problems(table, query, keys, "sale_date", 11)
            plan = spark.sql(
                f"EXPLAIN FORMATTED {inline_params(adapter.render(problems), adapter.bindable(params))}"
            )
            print(plan.collect()[0][0])


if __name__ == "__main__":
    main()

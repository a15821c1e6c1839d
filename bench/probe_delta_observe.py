#!/usr/bin/env python
"""Why an observed Delta overwrite seemed to cost more than Iceberg's (issue #30): the variants,
alternated in one cluster.

    python bench/probe_delta_observe.py [--runs 3] [--format delta|iceberg|both] [--rows N]
        [--only sql,plain,..] [--explain]

Starts one cluster as bench_delta.py does (its helpers, its 1,000,000-row window over a
3,000,000-row source), the driver's UI on (its REST API gives each SQL execution's jobs and
stages), and rewrites the window in turn (ABCD.. each run, after one warm-up each) by:

- ``sql``: the bare ``INSERT INTO t REPLACE WHERE .. SELECT``;
- ``plain``: ``writeTo(t).overwrite(pred)``, nothing observed;
- ``count``: the same with ``observe(count(*))``;
- ``checksum``: with the operator's aggregates (``window_aggregates``: count, and the row hashes
  summed as DECIMAL(38,0));
- ``checksum_halves``: the same sum as two BIGINT sums of the hashes' high and low 32 bits
  (``TRY_SUM``), to see what the DECIMAL arithmetic costs per row;
- ``checksum_nocheck``: ``checksum`` with Delta's replaceWhere constraint check off;
- ``op_observed`` / ``op_plain``: ``PartitionOverwriteOperator.execute``, its figures observed or
  read at the commit's version, its write alone (``write_observed``) timed too.

The probe's Delta tables never checkpoint: a checkpoint every 10th commit lands, with variants in a
fixed cycle, on the same variant each time. Prints each run's seconds, the medians, and per variant
its last run's SQL executions with their jobs and stages (``--explain``: their plans).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_delta import ICE, LITERAL_SQL, WINDOW  # noqa: E402
from probe_cluster import chosen, probe_cluster  # noqa: E402

from airflow_idempotent.operators import PartitionOverwriteOperator  # noqa: E402
from airflow_idempotent.spark import delta, iceberg  # noqa: E402
from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkEngine  # noqa: E402
from airflow_idempotent.spark.observed import window_aggregates, write_observed  # noqa: E402

SELECT = f"SELECT sale_id, amount_eur, rate, sale_date FROM ({LITERAL_SQL})"
DDL = (
    "CREATE TABLE {name} (sale_id BIGINT, amount_eur DECIMAL(12,2), rate DECIMAL(4,2), sale_date DATE) "
    "USING {fmt} PARTITIONED BY (sale_date)"
)

#: Delta writes a checkpoint every 10th commit, a few seconds more on that write: with variants
#: alternating in a fixed cycle it lands on the same variant each time, so the probe's tables have none
NO_CHECKPOINT = {"delta": " TBLPROPERTIES ('delta.checkpointInterval' = '100000')", "iceberg": ""}


def hash_call(aggregate: str) -> str:
    """The ``XXHASH64(..)`` call in `aggregate`, parentheses matched."""
    start = aggregate.index("XXHASH64(")
    depth = 0
    for i in range(start + len("XXHASH64"), len(aggregate)):
        depth += {"(": 1, ")": -1}.get(aggregate[i], 0)
        if depth == 0:
            return aggregate[start : i + 1]
    raise ValueError(aggregate)


def rest(ui: str, path: str) -> Any:
    with urllib.request.urlopen(f"{ui}/api/v1{path}", timeout=30) as r:
        return json.loads(r.read())


def variants(spark: Any, table: str, aggregates: list[str], halves: list[str], fmt: str) -> dict[str, Any]:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    def write(aggs: list[str], conf: dict[str, str] | None = None) -> Any:
        def run() -> Any:
            for k, v in (conf or {}).items():
                spark.conf.set(k, v)
            try:
                frame = spark.sql(SELECT)
                obs = Observation(f"p{time.monotonic_ns()}")
                if aggs:
                    frame = frame.observe(obs, *[F.expr(a).alias(f"m{i}") for i, a in enumerate(aggs)])
                frame.writeTo(table).overwrite(F.expr(WINDOW))
                return obs.get if aggs else None
            finally:
                for k in conf or {}:
                    spark.conf.unset(k)

        return run

    out = {
        "sql": lambda: spark.sql(f"INSERT INTO {table} REPLACE WHERE {WINDOW} {SELECT}"),
        "plain": write([]),
        "count": write(aggregates[:1]),
        "checksum": write(aggregates),
        "checksum_halves": write(halves),
    }
    if fmt == "delta":
        out["checksum_nocheck"] = write(
            aggregates, {"spark.databricks.delta.replaceWhere.constraintCheck.enabled": "false"}
        )
    return out


#: the operator's write alone (`write_observed`'s time) and its arguments, by variant
WRITES: dict[str, list[float]] = {}
CAPTURED: dict[str, Any] = {}


def window_operator(task_id: str, table: str) -> tuple[PartitionOverwriteOperator, dict[str, Any]]:
    """The probes' overwrite of August 2026 into `table`, and the context of its run."""
    import pendulum
    from bench_spark import WINDOW_SQL

    op = PartitionOverwriteOperator(
        task_id=task_id,
        table=table,
        conn_id="bench_spark",
        partition_column="sale_date",
        sql=WINDOW_SQL,
        granularity="month",
        emit_asset=False,
    )
    start = pendulum.datetime(2026, 8, 1, tz="UTC")
    return op, dict.fromkeys(("logical_date", "data_interval_start", "data_interval_end"), start)


def operator_write(module: Any, op: PartitionOverwriteOperator, context: dict[str, Any]) -> tuple[Any, ...]:
    """Run `op` once (`module`: `delta` or `iceberg`, whose write it makes), and return the
    positional arguments its `write_observed` call got: what the probes replay as the operator's
    write."""
    captured: dict[str, Any] = {}
    real = module.write_observed

    def capture(*a: Any, **kw: Any) -> Any:
        captured["args"] = a
        return real(*a, **kw)

    module.write_observed = capture
    try:
        op.execute(context)
    finally:
        module.write_observed = real
    return tuple(captured["args"])


def operator_variants(fmt: str, table: str) -> dict[str, Any]:
    """The operator itself, its window's figures observed or read at the commit's version; the
    time of its write alone (`write_observed`) kept in WRITES."""
    module = delta if fmt == "delta" else iceberg
    op, context = window_operator(f"probe_{fmt}", table)
    real = module.observable

    def variant(name: str, observe: bool) -> Any:
        def timed_write(*a: Any, **kw: Any) -> Any:
            CAPTURED[fmt] = (a, kw)
            t = time.perf_counter()
            try:
                return write_observed(*a, **kw)
            finally:
                WRITES.setdefault(name, []).append(time.perf_counter() - t)

        def run() -> Any:
            module.write_observed = timed_write
            module.observable = real if observe else (lambda *_a, **_k: False)
            try:
                return op.execute(context)["row_count"]
            finally:
                module.observable = real

        return run

    return {
        f"{fmt}:op_observed": variant(f"{fmt}:op_observed", True),
        f"{fmt}:op_plain": variant(f"{fmt}:op_plain", False),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--format", choices=("delta", "iceberg", "both"), default="both")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--only", help="comma-separated variant names")
    parser.add_argument("--explain", action="store_true", help="print the REST API's plan per variant")
    args = parser.parse_args()
    formats = ["delta", "iceberg"] if args.format == "both" else [args.format]
    with contextlib.ExitStack() as stack:
        # the Connect server as the bench started it when this probe was written
        probe = probe_cluster(stack, "idem_probe_obs", formats, args.rows, ui=True, connect_mode="server")
        cluster, spark, ui = probe.cluster, probe.spark, probe.ui
        app = rest(ui, "/applications")[0]["id"]
        adapter = SparkAdapter(SparkEngine(cluster.connect_url))
        conn = SparkConnection(spark, "probe")
        paths: dict[str, Any] = {}
        for fmt in formats:
            table = f"{ICE}probe_t" if fmt == "iceberg" else "probe_t"
            if fmt == "iceberg":
                spark.sql("CREATE NAMESPACE IF NOT EXISTS ice.bench")
            spark.sql(f"DROP TABLE IF EXISTS {table}")
            spark.sql(DDL.format(name=table, fmt=fmt) + NO_CHECKPOINT[fmt])
            info = adapter.describe(conn, table)
            aggs = window_aggregates(adapter, info, table, "sale_date", True)
            # the same hash sum as two BIGINT sums (high and low 32 bits: high * 2**32 + low is
            # the DECIMAL(38,0) sum exactly), no BigDecimal arithmetic per row
            digest = hash_call(aggs[1])
            halves = [aggs[0], f"TRY_SUM(SHIFTRIGHT({digest}, 32))", f"TRY_SUM({digest} & 4294967295)"]
            for name, run in variants(spark, table, aggs, halves, fmt).items():
                paths[f"{fmt}:{name}"] = run
            optable = f"{ICE}probe_op" if fmt == "iceberg" else "probe_op"
            spark.sql(f"DROP TABLE IF EXISTS {optable}")
            spark.sql(DDL.format(name=optable, fmt=fmt) + NO_CHECKPOINT[fmt])
            paths.update(operator_variants(fmt, optable))
        paths = chosen(paths, args.only)
        print("aggregates:", aggs, flush=True)
        times: dict[str, list[float]] = {k: [] for k in paths}
        last: dict[str, list[int]] = {}
        for run in paths.values():  # warm-up
            run()
        WRITES.clear()
        for fmt, (a, kw) in CAPTURED.items():
            print(
                f"{fmt} operator's write: select {a[3]!r}\n  predicate {a[4]!r} params {a[5]!r}\n"
                f"  aggregates {a[6]!r} options {a[7:]} {kw}",
                flush=True,
            )
        for i in range(args.runs):
            for name, run in paths.items():
                before = {e["id"] for e in rest(ui, f"/applications/{app}/sql?length=100000")}
                t = time.perf_counter()
                got = run()
                times[name].append(time.perf_counter() - t)
                after = rest(ui, f"/applications/{app}/sql?length=100000")
                new = [e for e in after if e["id"] not in before]
                last[name] = sorted(e["id"] for e in new)
                print(
                    f"run {i} {name:28s} {times[name][-1]:6.2f} s load {os.getloadavg()[0]:.1f} "
                    f"sql executions {len(new)} observed {got}",
                    flush=True,
                )
        print("\nmedians:")
        for name, v in times.items():
            print(f"  {name:28s} {statistics.median(v):6.2f} s  ({', '.join(f'{x:.2f}' for x in v)})")
        print("\nthe operator's write alone (write_observed):")
        for name, v in WRITES.items():
            print(f"  {name:28s} {statistics.median(v):6.2f} s  ({', '.join(f'{x:.2f}' for x in v)})")
        print("\nper variant, its last run's SQL executions (new since the run began):")
        all_sql = rest(ui, f"/applications/{app}/sql?length=100000&details=true&planDescription=true")
        stages = {s["stageId"]: s for s in rest(ui, f"/applications/{app}/stages")}
        jobs = {j["jobId"]: j for j in rest(ui, f"/applications/{app}/jobs")}
        ids = sorted(e["id"] for e in all_sql)
        for name in paths:
            print(f"\n== {name}")
            for e in all_sql:
                if e["id"] in last[name]:
                    js = e.get("successJobIds", []) + e.get("failedJobIds", [])
                    st = [s for j in js for s in jobs.get(j, {}).get("stageIds", [])]
                    desc = [
                        f"stage {s}: {stages[s]['numTasks']} tasks, "
                        f"{stages[s].get('executorRunTime', 0) / 1000:.2f} s run, "
                        f"in {stages[s].get('inputRecords', 0)} out {stages[s].get('outputRecords', 0)} "
                        f"rows, {stages[s]['name'][:60]}"
                        for s in st
                        if s in stages
                    ]
                    print(f"  sql {e['id']} {e['duration'] / 1000:.2f} s jobs {js}: {e['description'][:80]}")
                    for d in desc:
                        print(f"     {d}")
                    if args.explain and e["duration"] > 300:
                        print(e.get("planDescription", "")[:6000])
        _ = ids


if __name__ == "__main__":
    main()

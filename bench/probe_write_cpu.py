#!/usr/bin/env python
"""Which part of the operator's overwrite statement costs per row (issues #30, #36), measured by
the executors' own CPU time, not the wall clock alone.

    python bench/probe_write_cpu.py [--runs 5] [--format delta|iceberg|both] [--rows N]
        [--only a,b] [--explain]

One plugin-mode cluster as bench_delta.py starts it (its source and window: `--rows` rows over
three times as many), the driver's UI on: after each write the stages it ran are read from the
REST API (``/applications/<id>/stages``) and their ``executorCpuTime`` / ``executorRunTime``
summed, a figure the other processes on the machine move far less than the wall clock. Every
variant writes a table of its own (Delta rebuilds the previous commit's state unless its own path
read it), in the probe's one long-lived session; each run starts one variant later (alternated),
after one warm-up each. The operator's arguments are captured from one run of it. Variants:

- ``bare``: ``INSERT INTO t REPLACE WHERE <window> SELECT ..`` of the bench's literal SELECT;
- ``plain``: ``writeTo(t).overwrite(<window>)`` of that SELECT, nothing else;
- ``typed``: the operator's SELECT (cast to the table's types; on Iceberg with the CASE /
  raise_error guard on the partition column), nothing observed, no options;
- ``unguarded`` (Iceberg): ``typed`` without the guard (`typed_rows`, as on Delta);
- ``count``: ``typed`` with ``observe(count(*))``;
- ``checksum``: with the operator's aggregates (count, the row hashes summed in three slices);
- ``hash1``: count and ONE sum of the hash's low slice: one hash per row however the slices are
  evaluated (not the figure; what three slices would cost if each hashed again);
- ``hash_once``: the operator's aggregates over a column computed once before the observation
  (``XXHASH64(..) AS h``, dropped after it);
- ``full``: the operator's write as it makes it (``checksum`` + its options: the tag; on
  Iceberg REFRESH, the snapshot read, isolation options);
- ``decimal``: ``full`` with the checksum summed as before 2026-12-06 (each row's hash cast to
  DECIMAL(38,0), one SUM): the same figure;
- ``nocheck`` (Delta): ``full`` with Delta's replaceWhere constraint check off;
- ``operator``: ``PartitionOverwriteOperator.execute`` whole (its own new session).

Prints each run's seconds, CPU seconds and load; per variant the medians of wall seconds, of the
executors' CPU seconds and run seconds (all stages, and the largest one: the write), and with
``--explain`` the write's physical plan (WholeStageCodegen, CollectMetrics).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_delta import ICE, WINDOW  # noqa: E402
from probe_cluster import chosen, probe_cluster  # noqa: E402
from probe_delta_observe import DDL, NO_CHECKPOINT, SELECT, hash_call, operator_write, rest, window_operator  # noqa: E402

from airflow_idempotent.spark import cluster as clusters  # noqa: E402
from airflow_idempotent.spark import delta, iceberg, observed  # noqa: E402
from airflow_idempotent.spark.adapter import CONSTRAINT_CHECK, SparkAdapter, SparkConnection, SparkEngine  # noqa: E402

HASHED = "__idem_h"


class Stages:
    """The application's stages through the driver's REST API: the CPU of those new since `mark`."""

    def __init__(self, ui: str) -> None:
        self.ui = ui
        self.app = rest(ui, "/applications")[0]["id"]
        self.seen: set[int] = set()

    def all(self) -> list[dict[str, Any]]:
        return rest(self.ui, f"/applications/{self.app}/stages")

    def mark(self) -> None:
        self.seen = {s["stageId"] for s in self.all()}

    def new(self) -> tuple[float, float, float, float, list[int]]:
        """CPU s and run s over the stages new since `mark` (waiting for the listener to finish
        them), then those of the largest stage, and the new stages' ids."""
        for _ in range(50):
            fresh = [s for s in self.all() if s["stageId"] not in self.seen]
            if all(s["status"] in ("COMPLETE", "FAILED", "SKIPPED") for s in fresh):
                break
            time.sleep(0.1)
        cpu = sum(s.get("executorCpuTime", 0) for s in fresh) / 1e9
        run = sum(s.get("executorRunTime", 0) for s in fresh) / 1e3
        big = max(fresh, key=lambda s: s.get("executorRunTime", 0), default={})
        return (
            cpu,
            run,
            big.get("executorCpuTime", 0) / 1e9,
            big.get("executorRunTime", 0) / 1e3,
            [s["stageId"] for s in fresh],
        )


def process_cpu(cluster: clusters.SparkCluster) -> tuple[float, float]:
    """CPU seconds so far of the Connect server (the driver) and of the workers' groups (their
    executors), every thread counted: GC, JIT, Delta's and Iceberg's commit work on the driver."""
    driver = executors = 0.0
    for daemon in cluster.daemons:
        if daemon.name.startswith("worker"):
            executors += daemon.cpu_seconds()
        elif "connect" in daemon.name:
            driver += daemon.cpu_seconds()
    return driver, executors


def build(fmt: str, spark: Any, adapter: SparkAdapter) -> dict[str, Any]:
    """The variants of `fmt`, each on a table of its own, from one captured run of the operator."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from sqlglot import parse_one

    prefix = ICE if fmt == "iceberg" else ""
    if fmt == "iceberg":
        spark.sql("CREATE NAMESPACE IF NOT EXISTS ice.bench")
    names = [
        "bare",
        "plain",
        "typed",
        "count",
        "checksum",
        "hash1",
        "hash_once",
        "full",
        "decimal",
        "operator",
    ]
    names += ["nocheck"] if fmt == "delta" else ["unguarded"]
    tables = {v: f"{prefix}cpu_{fmt}_{v}" for v in names}
    for table in tables.values():
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(DDL.format(name=table, fmt=fmt) + NO_CHECKPOINT[fmt])
    module = delta if fmt == "delta" else iceberg
    op, context = window_operator(f"cpu_{fmt}", tables["operator"])
    _conn, _adapter, _table, select, predicate, binds, aggregates = operator_write(module, op, context)[:7]
    select = observed.inline_params(select, binds)
    predicate = observed.inline_params(predicate, binds)
    print(f"{fmt}: select {select}\n  predicate {predicate}\n  aggregates {aggregates}", flush=True)
    digest = hash_call(aggregates[1])
    once = [aggregates[0], aggregates[1].replace(digest, f"`{HASHED}`")]
    hash1 = [aggregates[0], f"COALESCE(SUM({digest} & 2097151), 0)"]
    # the sum as main made it before `SparkAdapter.hash_total` (2026-12-06): each hash a DECIMAL
    decimal = [aggregates[0], f"COALESCE(SUM(CAST({digest} AS DECIMAL(38, 0))), 0)"]
    info = adapter.describe(SparkConnection(spark, "probe"), tables["typed"])
    unguarded = adapter.render(
        adapter.typed_rows(info, list(info.columns), parse_one(WINDOW_SELECT, read="spark"))
    )
    conn = SparkConnection(spark, "probe")

    def write(
        table: str,
        sel: str = select,
        aggs: list[str] | None = None,
        options: bool = False,
        prehash: bool = False,
        conf: dict[str, str] | None = None,
    ) -> Any:
        def run() -> Any:
            opts: dict[str, str] = {}
            tag = delta.commit_tag(f"probe/{uuid.uuid4().hex}", "2026-08")
            if options and fmt == "iceberg":
                conn.sql(adapter.refresh(table))
                opts = iceberg.write_options(iceberg.current_snapshot(conn, adapter, table), tag)
            elif options:
                opts = {delta.USER_METADATA_OPTION: tag}
            for k, v in (conf or {}).items():
                spark.conf.set(k, v)
            try:
                frame = spark.sql(sel)
                if prehash:
                    frame = frame.selectExpr("*", f"{digest} AS `{HASHED}`")
                obs = Observation(f"p{uuid.uuid4().hex}")
                if aggs:
                    frame = frame.observe(obs, *[F.expr(a).alias(f"m{i}") for i, a in enumerate(aggs)])
                if prehash:
                    frame = frame.drop(HASHED)
                writer = frame.writeTo(table)
                for k, v in opts.items():
                    writer = writer.option(k, v)
                writer.overwrite(F.expr(predicate))
                return obs.get if aggs else None
            finally:
                for k in conf or {}:
                    spark.conf.set(k, "true")

        return run

    def operator() -> Any:
        return op.execute(context)["row_count"]

    out = {
        "bare": lambda: spark.sql(f"INSERT INTO {tables['bare']} REPLACE WHERE {WINDOW} {SELECT}"),
        "plain": write(tables["plain"], sel=SELECT),
        "typed": write(tables["typed"]),
        "count": write(tables["count"], aggs=aggregates[:1]),
        "checksum": write(tables["checksum"], aggs=aggregates),
        "hash1": write(tables["hash1"], aggs=hash1),
        "hash_once": write(tables["hash_once"], aggs=once, prehash=True),
        "full": write(tables["full"], aggs=aggregates, options=True),
        "decimal": write(tables["decimal"], aggs=decimal, options=True),
        "operator": operator,
    }
    if fmt == "delta":
        out["nocheck"] = write(
            tables["nocheck"], aggs=aggregates, options=True, conf={CONSTRAINT_CHECK: "false"}
        )
    else:
        out["unguarded"] = write(tables["unguarded"], sel=unguarded)
    return out


#: The operator's query with the window bound (what `typed_rows` wraps).
WINDOW_SELECT = (
    "SELECT s.sale_id, CAST(round(s.price_eur * 0.60, 2) AS DECIMAL(12,2)) AS amount_eur, "
    "CAST(0.60 AS DECIMAL(4,2)) AS rate, s.sale_date FROM bench_sales s "
    "WHERE s.sale_date >= DATE'2026-08-01' AND s.sale_date < DATE'2026-09-01'"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--format", choices=("delta", "iceberg", "both"), default="both")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--only", help="comma-separated variant names")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    formats = ["delta", "iceberg"] if args.format == "both" else [args.format]
    with contextlib.ExitStack() as stack:
        probe = probe_cluster(stack, "idem_probe_cpu", formats, args.rows, ui=True)
        cluster, spark = probe.cluster, probe.spark
        stages = Stages(probe.ui)
        adapter = SparkAdapter(SparkEngine(cluster.connect_url))
        paths: dict[str, Any] = {}
        for fmt in formats:
            for name, run in build(fmt, spark, adapter).items():
                paths[f"{fmt}:{name}"] = run
        paths = chosen(paths, args.only)
        loads = [os.getloadavg()]
        for run in paths.values():  # warm-up
            run()
        wall: dict[str, list[float]] = {k: [] for k in paths}
        cpu: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in paths}
        procs: dict[str, list[tuple[float, float]]] = {k: [] for k in paths}
        order = list(paths.items())
        for turn in range(args.runs):
            shift = turn % len(order)
            for name, run in order[shift:] + order[:shift]:
                stages.mark()
                before = process_cpu(cluster)
                t = time.perf_counter()
                got = run()
                wall[name].append(time.perf_counter() - t)
                c, r, bc, br, ids = stages.new()
                after = process_cpu(cluster)
                drv, exe = (after[0] - before[0], after[1] - before[1])
                cpu[name].append((c, r, bc, br))
                procs[name].append((drv, exe))
                print(
                    f"run {turn} {name:20s} {wall[name][-1]:6.2f} s  cpu {c:6.2f} run {r:6.2f} "
                    f"driver proc {drv:5.2f} executor procs {exe:5.2f} "
                    f"(write stage cpu {bc:5.2f} run {br:5.2f}; {len(ids)} stages) "
                    f"load {os.getloadavg()[0]:.1f} got {got}",
                    flush=True,
                )
            loads.append(os.getloadavg())
        print(
            "\nmedians: wall s (x bare) | executor CPU s (x bare) | run s | write stage CPU s, run s"
            " | process CPU s: driver, executors (GC and JIT included)"
        )
        for name in paths:
            fmt = name.split(":")[0]
            base = f"{fmt}:bare"
            w = statistics.median(wall[name])
            cs = [x[0] for x in cpu[name]]
            c = statistics.median(cs)
            wb = statistics.median(wall[base]) if base in wall else float("nan")
            cb = statistics.median(x[0] for x in cpu[base]) if base in cpu else float("nan")
            print(
                f"  {name:20s} {w:6.2f} ({w / wb:4.2f}x) | {c:6.2f} ({c / cb:4.2f}x) | "
                f"{statistics.median(x[1] for x in cpu[name]):6.2f} | "
                f"{statistics.median(x[2] for x in cpu[name]):6.2f}, "
                f"{statistics.median(x[3] for x in cpu[name]):6.2f} | "
                f"{statistics.median(x[0] for x in procs[name]):5.2f}, "
                f"{statistics.median(x[1] for x in procs[name]):5.2f}   "
                f"wall ({', '.join(f'{x:.2f}' for x in wall[name])}) "
                f"cpu ({', '.join(f'{x:.2f}' for x in cs)})"
            )
        print(
            "load averages (1, 5, 15 min) at the start and after each run:",
            [tuple(round(x, 1) for x in la) for la in loads],
        )
        if args.explain:
            sql = rest(
                stages.ui, f"/applications/{stages.app}/sql?length=100000&details=true&planDescription=true"
            )
            for e in sql[-40:]:
                if e["duration"] > 300:
                    plan = e.get("planDescription", "")
                    print(f"\n== sql {e['id']} {e['duration'] / 1000:.2f} s {e['description'][:100]}")
                    print(plan.split("\n\n", 1)[0][:4000])


if __name__ == "__main__":
    main()

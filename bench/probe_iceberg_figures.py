#!/usr/bin/env python
"""Issue #36: what the Iceberg overwrite operator's count and checksum cost its write, in one cluster.

    python bench/probe_iceberg_figures.py [--runs 6] [--rows N] [--only a,b,..] [--classpath]

Starts one cluster as bench_delta.py does (its helpers, its 1,000,000-row window over a
3,000,000-row source, Iceberg's JDBC catalog; the driver's UI on, for its REST API) and rewrites
the window in turn (each run starting one variant later, after one warm-up each), each variant on
an Iceberg table of its own:

- ``sql``: the bare ``INSERT INTO t REPLACE WHERE .. SELECT`` in the probe's long-lived session;
- ``op``: ``PartitionOverwriteOperator.execute`` as it is (count and checksum observed on the
  rows written, the hash summed as DECIMAL(38,0)); ``op_halves`` the hash summed as two BIGINT
  ``TRY_SUM``s (high and low 32 bits, rejoined exactly: the same total); ``op_read`` nothing
  observed, the count and checksum read ``VERSION AS OF`` the snapshot; ``op_bare`` nothing
  observed and nothing read (a floor, not a design: the figures are left out);
- ``wt*``: the operator's own write (its SELECT, predicate, aggregates, captured from ``op``) in
  the probe's long-lived session: ``wt`` the bare SELECT, ``wt_checked`` the checked SELECT,
  ``wt_opts`` + REFRESH and the isolation options, ``wt_obs`` + the observation, ``wt_pre`` the
  hash computed as a column of the projection and only its sum observed;
- ``f_*``: that write in a new Spark Connect session per call, as the operator opens one:
  ``f_opts`` nothing observed, ``f_obs`` observed as the operator does, ``f_pre`` as ``wt_pre``,
  ``f_count`` the count alone, ``f_twice`` two observed writes a session (the second timed),
  ``f_interp`` observed with Spark's expression factories interpreted (no class compiled for
  the observation's projections).

``--classpath`` puts the jars on the driver's and executors' class path instead of ``--jars``.
Prints each run's seconds, its write's SQL execution and task time, and the load; the medians; and
how many classes the cluster's logs say were generated.
"""

from __future__ import annotations

import argparse
import contextlib
import json
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

from bench_delta import ICE, WINDOW, catalog_database, source_sql  # noqa: E402
from probe_delta_observe import DDL, SELECT, rest, window_operator  # noqa: E402
from scratch import scratch_dir  # noqa: E402

from airflow_idempotent.spark import cluster as spark_cluster  # noqa: E402
from airflow_idempotent.spark import delta, iceberg, observed  # noqa: E402

WRITES: dict[str, list[float]] = {}
CAPTURED: dict[str, Any] = {}
REAL = {
    "observable": iceberg.observable,
    "window_aggregates": iceberg.window_aggregates,
    "write_observed": iceberg.write_observed,
    "window_stats": delta.window_stats,
}


def halves(*args: Any, **kwargs: Any) -> list[str]:
    """The operator's aggregates, the hash's sum as two BIGINT TRY_SUMs of its 32-bit halves."""
    aggs = REAL["window_aggregates"](*args, **kwargs)
    digest = "XXHASH64" + aggs[1].split("CAST(XXHASH64", 1)[1].rsplit(" AS DECIMAL", 1)[0]
    return [aggs[0], f"TRY_SUM(SHIFTRIGHT({digest}, 32))", f"TRY_SUM({digest} & 4294967295)"]


def write_halves(
    conn: Any,
    adapter: Any,
    table: str,
    select: str,
    predicate: str,
    params: Any,
    aggregates: list[str],
    options: Any = None,
) -> Any:
    """write_observed with three aggregates: count, high and low sums, rejoined exactly."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from airflow_idempotent.spark.adapter import inline_params

    frame = conn.session.sql(inline_params(select, params) if params else select)
    obs = Observation(f"idem_{uuid.uuid4().hex}")
    frame = frame.observe(obs, *[F.expr(a).alias(f"m{i}") for i, a in enumerate(aggregates)])
    writer = frame.writeTo(adapter.qualified(table))
    for k, v in (options or {}).items():
        writer = writer.option(k, v)
    writer.overwrite(F.expr(inline_params(predicate, params) if params else predicate))
    got = obs.get
    if got.get("m1") is None or got.get("m2") is None:
        return None
    return observed.Observed(int(got["m0"]), int(got["m1"]) * 2**32 + int(got["m2"]))


def operator(name: str, table: str) -> Any:
    op, context = window_operator(f"probe_{name}", table)

    def run() -> Any:
        write = write_halves if name == "op_halves" else REAL["write_observed"]

        def timed_write(*a: Any, **kw: Any) -> Any:
            CAPTURED.setdefault("write", (a, kw))
            t = time.perf_counter()
            try:
                return write(*a, **kw)
            finally:
                WRITES.setdefault(name, []).append(time.perf_counter() - t)

        iceberg.write_observed = timed_write
        iceberg.window_aggregates = halves if name == "op_halves" else REAL["window_aggregates"]
        if name in ("op_read", "op_bare"):
            iceberg.observable = lambda *_a, **_k: False
        if name == "op_bare":
            delta.window_stats = lambda *_a, **_k: (0, None, 0)
        try:
            result = op.execute(context)
            return result["row_count"], result.get("checksum")
        finally:
            iceberg.write_observed = REAL["write_observed"]
            iceberg.window_aggregates = REAL["window_aggregates"]
            iceberg.observable = REAL["observable"]
            delta.window_stats = REAL["window_stats"]

    return run


def session_writes(spark: Any, table: str, name: str) -> Any:
    """The operator's own write (its captured SELECT, predicate, aggregates) in the probe's
    long-lived session: `wt` the bare SELECT, nothing else; `wt_checked` the operator's checked
    SELECT; `wt_opts` with REFRESH and the isolation options; `wt_obs` observed too."""
    from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkEngine

    adapter = SparkAdapter(SparkEngine("sc://unused"))
    conn = SparkConnection(spark, "probe")

    def run() -> Any:
        (_c, _a, _t, select, predicate, params, aggregates, *_more), _kw = CAPTURED["write"]
        options = None
        if name == "wt":
            select, params = SELECT, {}
            predicate = WINDOW
        if name in ("wt_opts", "wt_obs"):
            conn.sql(adapter.refresh(table))
            options = iceberg.write_options(iceberg.current_snapshot(conn, adapter, table), "probe")
        aggs = aggregates if name == "wt_obs" else []
        got = REAL["write_observed"](conn, adapter, table, select, predicate, params, aggs, options)
        return None if got is None else got.rows

    return run


def precomputed(frame: Any, obs: Any, aggregates: list[str]) -> Any:
    """`frame` observed with the row hash computed as a column of the projection (whole-stage
    code), the observation summing that column, the column dropped after."""
    from pyspark.sql import functions as F

    digest = aggregates[1].split("SUM(", 1)[1].rsplit("), 0)", 1)[0]  # CAST(XXHASH64(..) AS DECIMAL(38, 0))
    columns = frame.columns
    frame = frame.withColumn("__idem_h", F.expr(digest))
    frame = frame.observe(
        obs, F.expr("COUNT(*)").alias("m0"), F.expr("COALESCE(SUM(__idem_h), 0)").alias("m1")
    )
    return frame.select(*columns)


def fresh_writes(cluster: Any, table: str, name: str) -> Any:
    """The operator's write (REFRESH, options, its SELECT) in a new Connect session per call
    (`f_*`, module docstring), or `wt_pre` in the probe's long-lived session."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkEngine, inline_params

    adapter = SparkAdapter(SparkEngine(cluster.connect_url))

    def write(conn: Any) -> Any:
        (_c, _a, _t, select, predicate, params, aggregates, *_more), _kw = CAPTURED["write"]
        conn.sql(adapter.refresh(table))
        options = iceberg.write_options(iceberg.current_snapshot(conn, adapter, table), "probe")
        frame = conn.session.sql(inline_params(select, params))
        obs = Observation(f"idem_{uuid.uuid4().hex}")
        if name == "f_interp":  # the observation's projections interpreted: nothing to compile
            conn.session.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        if name in ("f_obs", "f_twice", "f_interp"):
            frame = frame.observe(obs, *[F.expr(a).alias(f"m{i}") for i, a in enumerate(aggregates)])
        elif name in ("f_pre", "wt_pre"):
            frame = precomputed(frame, obs, aggregates)
        elif name == "f_count":
            frame = frame.observe(obs, F.expr(aggregates[0]).alias("m0"))
        writer = frame.writeTo(adapter.qualified(table))
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.overwrite(F.expr(inline_params(predicate, params)))
        return None if name == "f_opts" else obs.get

    def run() -> Any:
        if name == "wt_pre":
            return write(SparkConnection(LONG[0], "probe"))
        with adapter.engine.connect() as conn:
            if name == "f_twice":
                write(conn)
                t = time.perf_counter()
                got = write(conn)
                WRITES.setdefault(name, []).append(time.perf_counter() - t)
                return got
            return write(conn)

    return run


LONG: list[Any] = []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--only", help="comma-separated variant names")
    parser.add_argument(
        "--classpath",
        action="store_true",
        help="the jars on the driver's and executors' class path instead of --jars",
    )
    args = parser.parse_args()
    names = ["sql", "wt", "wt_checked", "wt_opts", "wt_obs", "op", "op_halves", "op_read", "op_bare"]
    names += ["f_opts", "f_obs", "f_pre", "f_count", "f_twice", "wt_pre", "f_interp"]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    with contextlib.ExitStack() as stack:
        from airflow_idempotent.testing.ports import free_port

        work = scratch_dir("idem_probe_ice_")
        conf = dict(spark_cluster.DELTA_CONF)
        conf.update(
            spark_cluster.iceberg_conf(stack.enter_context(catalog_database()), "postgres", work / "iceberg")
        )
        ui_port = free_port()
        conf.update({"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)})
        jars = spark_cluster.delta_jars(
            os.environ.get("IDEM_SPARK_JARS") or ROOT / spark_cluster.SPARK_JARS_DIR
        )
        if args.classpath:
            path = ":".join(str(Path(j).resolve()) for j in jars)
            conf.update({"spark.driver.extraClassPath": path, "spark.executor.extraClassPath": path})
            jars = []
        t0 = time.monotonic()
        cluster = spark_cluster.SparkCluster.start(work / "spark", extra_conf=conf, jars=jars)
        print(f"cluster started in {time.monotonic() - t0:.1f} s", flush=True)
        stack.callback(cluster.stop)
        spark = cluster.session()
        LONG.append(spark)
        stack.callback(spark.stop)
        ui = f"http://127.0.0.1:{ui_port}"
        app = rest(ui, "/applications")[0]["id"]
        spark.sql("DROP TABLE IF EXISTS bench_sales")
        spark.sql(source_sql(args.rows))
        spark.sql("CREATE NAMESPACE IF NOT EXISTS ice.bench")
        os.environ["AIRFLOW_CONN_BENCH_SPARK"] = json.dumps(
            {"conn_type": "spark_connect", "host": "127.0.0.1", "port": cluster.connect_port}
        )
        os.environ["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = json.dumps(
            {"conn_type": "sqlite", "host": str(work / "history.db")}
        )
        paths: dict[str, Any] = {}
        for name in ["op", *names]:  # the operator first: its write's arguments are captured
            table = f"{ICE}probe_{name}"
            if name in paths:
                continue
            spark.sql(f"DROP TABLE IF EXISTS {table}")
            spark.sql(DDL.format(name=table, fmt="iceberg"))
            if name == "sql":
                statement = f"INSERT INTO {table} REPLACE WHERE {WINDOW} {SELECT}"
                paths[name] = lambda s=statement: spark.sql(s)
            elif name.startswith("f_") or name == "wt_pre":
                paths[name] = fresh_writes(cluster, table, name)
            elif name.startswith("wt"):
                paths[name] = session_writes(spark, table, name)
            else:
                paths[name] = operator(name, table)
        paths = {k: v for k, v in paths.items() if k in names}
        times: dict[str, list[float]] = {k: [] for k in paths}
        engine: dict[str, list[float]] = {k: [] for k in paths}
        stage_s: dict[str, list[float]] = {k: [] for k in paths}
        for name, run in paths.items():  # warm-up
            print(f"warm-up {name}: {run()}", flush=True)
        WRITES.clear()
        order = list(paths.items())
        for i in range(args.runs):
            shift = i % len(order)
            for name, run in order[shift:] + order[:shift]:
                before = {e["id"] for e in rest(ui, f"/applications/{app}/sql?length=100000")}
                t = time.perf_counter()
                got = run()
                times[name].append(time.perf_counter() - t)
                new = [e for e in rest(ui, f"/applications/{app}/sql?length=100000") if e["id"] not in before]
                longest = max(new, key=lambda e: e["duration"])
                engine[name].append(longest["duration"] / 1000)
                jobs = longest.get("successJobIds", [])
                run_s = 0.0
                for j in jobs:
                    for st in rest(ui, f"/applications/{app}/jobs/{j}")["stageIds"]:
                        for attempt in rest(ui, f"/applications/{app}/stages/{st}"):
                            run_s += attempt.get("executorRunTime", 0) / 1000
                stage_s[name].append(run_s)
                print(
                    f"run {i} {name:10s} {times[name][-1]:6.2f} s write exec {engine[name][-1]:5.2f} s "
                    f"task time {run_s:5.2f} s; {len(new)} sql; load {os.getloadavg()[0]:.1f} {got}",
                    flush=True,
                )
        import subprocess

        logs = subprocess.run(
            ["grep", "-rhoE", "falling back[^.]*|Code generated in [0-9.]+ ms", str(work / "spark")],
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        fallback = [x for x in logs if x.startswith("falling")]
        gen = [float(x.split()[3]) for x in logs if x.startswith("Code generated")]
        print(
            f"executor/driver logs: {len(fallback)} codegen fallbacks {fallback[:3]}; "
            f"{len(gen)} classes generated, {sum(gen) / 1000:.1f} s compiling"
        )
        print("\nmedians: whole call; write alone; the write's SQL execution; its tasks' run time")
        base = statistics.median(times["sql"]) if "sql" in times else None
        for name, v in times.items():
            m = statistics.median(v)
            w = f"{statistics.median(WRITES[name]):6.2f}" if name in WRITES else "     -"
            r = f"{m / base:.2f}x" if base else ""
            print(
                f"  {name:10s} {m:6.2f} s {r:6s} write {w} exec {statistics.median(engine[name]):5.2f} "
                f"tasks {statistics.median(stage_s[name]):5.2f}  ({', '.join(f'{x:.2f}' for x in v)})"
            )


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Delta Lake and Iceberg benchmark: the operators against the bare statement, in the same run.

Run on demand (it is not a test), on a quiet machine: ``python bench/bench_delta.py`` from the
repository root, with the project's venv (the spark extra, Java 17) and the jars (`make
spark-jars`). It writes bench/results/delta.md; ``--format iceberg`` writes
bench/results/iceberg.md, its JDBC catalog in a PostgreSQL database of its own (127.0.0.1:5432,
created and dropped by the run) and its tables in catalog ``ice``: the operator's overwrite
(``INSERT INTO .. WITH (isolation-level serializable, ..) REPLACE WHERE`` with the partition
column checked in the statement) against Iceberg's plain ``INSERT INTO .. REPLACE WHERE``.

On a standalone cluster it starts itself on loopback (a master, two 1-core workers, a Spark
Connect server with Delta's extension; ``--cluster-dir`` attaches to one already running), from a
3,000,000-row source over 90 days, it rewrites one 31-day window of 999,998 rows (32,258 a day) of
a Delta table partitioned by day, alternating (ABAB, each run starting one path later) after one warm-up each
(`--warmups N`: N rounds):

- overwrite: ``PartitionOverwriteOperator.execute`` (one REPLACE WHERE commit tagged with the
  attempt, then the window's count and checksum at that version, the rows it replaced at the
  version it read, history in SQLite) against the bare ``INSERT INTO t REPLACE WHERE .. SELECT``;
- merge: ``MergeOperator.execute`` (one MERGE INTO commit whose source refuses repeated, NULL
  and held keys itself, `spark.merges`, the count and checksum at its version) against the bare
  ``MERGE INTO``.

Every measured run is a rerun of the window (the target already holds it). Goal: within 1.2x.
``--rows 10000000`` benches a 10,000,000-row window (the source three windows' worth, as at the
default 1,000,000) to show how the cost grows; ``--only overwrite`` (or ``merge``) one write's
paths.
Each bare statement is also run as an Airflow task runs it, in a Spark Connect session of its own
(the operator opens one per call too): a new session's first statements pay its catalog's and
file listings' setup, 1.3 s for an Iceberg MERGE here.

``--connect-mode`` says how the started cluster's Connect server runs (`SparkCluster.start`):
``server`` (Spark's launcher: each session its own class loader, so each operator call compiles its
generated code again), ``plugin`` (a driver of ours with Connect as its plugin, sessions sharing the
compiled code), or ``both``: one cluster of each, their paths alternated in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pendulum
import sqlalchemy as sa
from scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator  # noqa: E402
from airflow_idempotent.spark import delta, iceberg, steps  # noqa: E402
from airflow_idempotent.spark.cluster import (  # noqa: E402
    CONNECT_MODES,
    DELTA_CONF,
    SPARK_JARS_DIR,
    SparkCluster,
    delta_jars,
    iceberg_conf,
)

sys.path.insert(0, str(ROOT / "bench"))
from bench_spark import PER_DAY, SOURCE_ROWS, SOURCE_SQL, WINDOW_SQL, machine  # noqa: E402

WINDOW_START = pendulum.datetime(2026, 8, 1, tz="UTC")
TARGET_DDL = (
    "CREATE TABLE {name} (sale_id BIGINT, amount_eur DECIMAL(12,2), rate DECIMAL(4,2), sale_date DATE) "
    "USING delta PARTITIONED BY (sale_date)"
)
LITERAL_SQL = WINDOW_SQL.replace(":window_start", "DATE'2026-08-01'").replace(
    ":window_end", "DATE'2026-09-01'"
)
WINDOW = "sale_date >= DATE'2026-08-01' AND sale_date < DATE'2026-09-01'"
BARE_REPLACE = (
    f"INSERT INTO bench_delta_bare REPLACE WHERE {WINDOW} "
    f"SELECT sale_id, amount_eur, rate, sale_date FROM ({LITERAL_SQL})"
)
BARE_MERGE = (
    f"MERGE INTO bench_delta_bare_merge t USING ({LITERAL_SQL}) s ON t.sale_id = s.sale_id AND "
    "t.sale_date >= DATE'2026-08-01' AND t.sale_date < DATE'2026-09-01' "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
)
TABLES = (
    "bench_sales",
    "bench_delta_op",
    "bench_delta_bare",
    "bench_delta_merge",
    "bench_delta_bare_merge",
    "bench_delta_bare_task",
    "bench_delta_bare_merge_task",
    "bench_delta_op_unobserved",
)
#: The bare statements as a task runs them (a Spark Connect session of its own, like the
#: operator's), on tables of their own: an Iceberg table written from another session is stale in
#: a session's catalog cache, whose next MERGE then fails Iceberg's validation.
TASK_REPLACE = BARE_REPLACE.replace("bench_delta_bare ", "bench_delta_bare_task ")
TASK_MERGE = BARE_MERGE.replace("bench_delta_bare_merge ", "bench_delta_bare_merge_task ")
#: Iceberg's tables live in the JDBC catalog `ice`, namespace `bench`.
ICE = "ice.bench."
#: The Connect server's mode of a started cluster unless `--connect-mode` says otherwise (`plugin`,
#: as the test cluster: each call's session reuses the compiled code; results before 2026-12-05 15:40
#: were taken on `server`).
DEFAULT_MODE = "plugin"


def named(statement: str, fmt: str) -> str:
    """A statement or DDL for `fmt`: Iceberg's tables are in catalog `ice` and USING iceberg."""
    if fmt == "delta":
        return statement
    for name in TABLES[1:]:
        statement = statement.replace(f" {name} ", f" {ICE}{name} ")
    return statement.replace("USING delta", "USING iceberg")


@contextlib.contextmanager
def catalog_database(mode: str) -> Any:
    """A PostgreSQL database for Iceberg's JDBC catalog, dropped at the end (trust auth, loopback)."""

    name = f"idem_bench_ice_{os.getpid()}_{mode}"
    admin = sa.create_engine(
        "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres", isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"jdbc:postgresql://127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def source_sql(rows: int) -> str:
    """bench_spark's source, sized for a window of about `rows` rows (31 days of rows // 31 a
    day), three windows' worth as at the default 1,000,000."""
    per_day = max(1, rows // 31)
    total = per_day * SOURCE_ROWS // PER_DAY
    return SOURCE_SQL.replace(f"DIV {PER_DAY} ", f"DIV {per_day} ").replace(
        f"range(0, {SOURCE_ROWS})", f"range(0, {total})"
    )


def in_own_session(cluster: SparkCluster, statement: str) -> None:
    """`statement` in a new Spark Connect session, stopped after: what a task of its own pays."""
    session = cluster.session()
    try:
        session.sql(statement)
    finally:
        session.stop()


def without_observation(run: Any) -> Any:
    """`run` with every overwrite's figures read at the commit's version (the path a CHAR column
    takes), restored after: `--observe-ab`'s second operator."""

    def unobserved() -> None:
        saved = delta.observable, iceberg.observable
        delta.observable = iceberg.observable = lambda *_args, **_kw: False
        try:
            run()
        finally:
            delta.observable, iceberg.observable = saved

    return unobserved


def timed(run: Any) -> float:
    t = time.perf_counter()
    run()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs of each path (ABAB)")
    parser.add_argument(
        "--warmups",
        type=int,
        default=1,
        help="unmeasured rounds of every path before the measured ones (1, as every run before"
        " 2026-12-08; the first measured repetition was each path's slowest, the JIT still warming)",
    )
    parser.add_argument("--cluster-dir", help="attach to a running cluster (its base directory)")
    parser.add_argument("--format", choices=("delta", "iceberg"), default="delta")
    parser.add_argument("--out", help="results file (default bench/results/<format>.md)")
    parser.add_argument(
        "--rows",
        type=int,
        default=1_000_000,
        help="the window's rows (about; 31 days), 1,000,000 by default",
    )
    parser.add_argument(
        "--only", choices=("overwrite", "merge"), help="bench one write's paths only (default both)"
    )
    parser.add_argument(
        "--no-observe",
        action="store_true",
        help="an overwrite's count and checksum read at the commit's version instead of observed on"
        " the rows written: the A/B of the observation",
    )
    parser.add_argument(
        "--observe-ab",
        action="store_true",
        help="also run the overwrite operator with its figures read at the commit's version (on a table"
        " of its own), alternated with the observed one in the same run: the observation's A/B without"
        " two runs' load between them",
    )
    parser.add_argument(
        "--connect-mode",
        choices=(*CONNECT_MODES, "both"),
        default=DEFAULT_MODE,
        help="how the started cluster's Connect server runs (cluster.CONNECT_MODES); `both`: one"
        " cluster of each, started together, their paths alternated in the same run",
    )
    args = parser.parse_args()
    if args.no_observe:  # the fallback every overwrite takes with a CHAR column
        delta.observable = iceberg.observable = lambda *_args, **_kw: False
    modes = list(CONNECT_MODES) if args.connect_mode == "both" else [args.connect_mode]
    if args.cluster_dir and len(modes) > 1:
        parser.error("--connect-mode both starts its clusters: not with --cluster-dir")
    with contextlib.ExitStack() as stack:
        work = scratch_dir(f"idem_bench_{args.format}_")
        confs = {}
        for mode in modes:
            conf = dict(DELTA_CONF)
            if args.format == "iceberg":
                database = stack.enter_context(catalog_database(mode))
                conf.update(iceberg_conf(database, "postgres", work / f"iceberg-{mode}"))
            confs[mode] = conf
        run_bench(args, confs, work)


def prepare(
    args: argparse.Namespace, mode: str, cluster: SparkCluster, spark: Any, phases: dict[str, Any]
) -> dict[str, Any]:
    """The tables on `cluster` and its paths to time (named by path, `[mode]` appended when the run
    has more than one cluster), each run by the operators through a connection of its own."""
    fmt = args.format
    suffix = f" [{mode}]" if args.connect_mode == "both" else ""
    conn_id = f"bench_spark_{mode}"
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": cluster.connect_port}
    )
    prefix = ICE if fmt == "iceberg" else ""
    if fmt == "iceberg":
        spark.sql("CREATE NAMESPACE IF NOT EXISTS ice.bench")
    for name in TABLES:
        spark.sql(f"DROP TABLE IF EXISTS {prefix if name != TABLES[0] else ''}{name}")
    spark.sql(source_sql(args.rows))
    for name in TABLES[1:]:
        spark.sql(named(TARGET_DDL.format(name=f"{prefix}{name}"), fmt))
    common: dict[str, Any] = {
        "conn_id": conn_id,
        "partition_column": "sale_date",
        "sql": WINDOW_SQL,
        "granularity": "month",
        "emit_asset": False,
    }
    overwrite = PartitionOverwriteOperator(
        task_id=f"bench_overwrite_{mode}", table=f"{prefix}bench_delta_op", **common
    )
    merge = MergeOperator(
        task_id=f"bench_merge_{mode}", table=f"{prefix}bench_delta_merge", key_columns=["sale_id"], **common
    )
    unobserved = PartitionOverwriteOperator(
        task_id=f"bench_overwrite_unobserved_{mode}", table=f"{prefix}bench_delta_op_unobserved", **common
    )
    context = dict.fromkeys(("logical_date", "data_interval_start", "data_interval_end"), WINDOW_START)

    def stepped(operator: Any) -> Any:
        """The operator's run, its time between the commit's steps kept by path and step."""

        def run() -> None:
            marks: list[tuple[str, float]] = [("start", time.perf_counter())]
            steps.step_hook = lambda name: marks.append((name, time.perf_counter()))
            operator.execute(context)
            marks.append(("end (history, fence, return)", time.perf_counter()))
            for a, b in itertools.pairwise(marks):
                phases.setdefault(operator.task_id, {}).setdefault(b[0], []).append(b[1] - a[1])

        return run

    paths = {
        "PartitionOverwriteOperator": stepped(overwrite),
        "PartitionOverwriteOperator, not observed": without_observation(stepped(unobserved)),
        "bare INSERT INTO .. REPLACE WHERE": lambda: spark.sql(named(BARE_REPLACE, fmt)),
        "MergeOperator": stepped(merge),
        "bare MERGE INTO": lambda: spark.sql(named(BARE_MERGE, fmt)),
        "bare REPLACE WHERE, own session": lambda: in_own_session(cluster, named(TASK_REPLACE, fmt)),
        "bare MERGE INTO, own session": lambda: in_own_session(cluster, named(TASK_MERGE, fmt)),
    }
    if args.only:
        paths = {k: v for k, v in paths.items() if ("MERGE" in k.upper()) == (args.only == "merge")}
    if not args.observe_ab:
        paths.pop("PartitionOverwriteOperator, not observed", None)
    return {k + suffix: v for k, v in paths.items()}


def run_bench(args: argparse.Namespace, confs: dict[str, dict[str, str]], work: Path) -> None:
    fmt = args.format
    out = args.out or str(ROOT / "bench" / "results" / f"{fmt}.md")
    began = time.monotonic()
    clusters: dict[str, SparkCluster] = {}
    sessions: dict[str, Any] = {}
    os.environ["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = json.dumps(
        {"conn_type": "sqlite", "host": str(work / "history.db")}
    )
    at_start = machine()
    phases: dict[str, dict[str, list[float]]] = {}
    times: dict[str, list[float]] = {}
    try:
        for mode, conf in confs.items():
            if args.cluster_dir:
                clusters[mode] = SparkCluster.attach(args.cluster_dir)
            else:
                jars = delta_jars(os.environ.get("IDEM_SPARK_JARS") or ROOT / SPARK_JARS_DIR)
                clusters[mode] = SparkCluster.start(
                    work / f"spark-{mode}", extra_conf=conf, jars=jars, connect_mode=mode
                )
        started = time.monotonic() - began
        paths: dict[str, Any] = {}
        for mode, cluster in clusters.items():
            sessions[mode] = cluster.session()
            paths.update(prepare(args, mode, cluster, sessions[mode], phases))
        times = {name: [] for name in paths}
        for _ in range(max(1, args.warmups)):  # the first write of the window, executors started
            for run in paths.values():
                run()
        phases.clear()
        order = list(paths.items())
        for turn in range(args.runs):
            # each run starts one path later: a path's place in the turn costs it (the first Delta
            # write of a turn was the slowest in probe_delta_observe.py), so no path keeps one place
            shift = turn % len(order)
            for name, run in order[shift:] + order[:shift]:
                times[name].append(timed(run))
                print(f"run {turn}: {name} {times[name][-1]:.2f} s", flush=True)
        window_rows = 31 * max(1, args.rows // 31)
        prefix = ICE if fmt == "iceberg" else ""
        for spark in sessions.values():
            for name in TABLES[1:]:
                rows = spark.sql(f"SELECT count(*) FROM {prefix}{name}").collect()[0][0]
                assert rows in (0, window_rows), (name, rows)  # 0: a path not benched (--only)
    finally:
        for spark in sessions.values():
            spark.stop()
        if not args.cluster_dir:
            for cluster in clusters.values():
                cluster.stop()
    at_end = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({"times": times, "phases": phases}), flush=True)  # kept if the report fails
    how = "attached: started earlier" if args.cluster_dir else f"started in {started:.1f} s"
    med = {k: statistics.median(v) for k, v in times.items()}

    def ratio(operator: str, bare: str) -> str:
        """operator / bare statement (medians), or why there is none (`--only`)."""
        return f"**{med[operator] / med[bare]:.2f}x**" if operator in med and bare in med else "not benched"

    ratios = []
    for mode in confs:
        sfx = f" [{mode}]" if args.connect_mode == "both" else ""
        op = f"PartitionOverwriteOperator{sfx}"
        observed_ab = ratio(op, f"PartitionOverwriteOperator, not observed{sfx}")
        ratios.append(
            (f"Connect server `{mode}`: " if sfx else "") + f"Overwrite: operator / bare statement (medians) "
            f"{ratio(op, f'bare INSERT INTO .. REPLACE WHERE{sfx}')}; "
            f"merge: {ratio(f'MergeOperator{sfx}', f'bare MERGE INTO{sfx}')}. Against the bare statement"
            " in a Spark Connect session of its own, as an Airflow task runs it (each operator call opens"
            f" one too): overwrite {ratio(op, f'bare REPLACE WHERE, own session{sfx}')}"
            f", merge {ratio(f'MergeOperator{sfx}', f'bare MERGE INTO, own session{sfx}')}."
            + (
                " The overwrite observed / its figures read at the commit's version (`--observe-ab`): "
                f"{observed_ab}."
                if f"PartitionOverwriteOperator, not observed{sfx}" in med
                else ""
            )
        )
    per_day = max(1, args.rows // 31)
    flags = "".join(
        f" --{k} {v}"
        for k, v in (("rows", args.rows if args.rows != 1_000_000 else None), ("only", args.only))
        if v
    )
    flags += " --no-observe" if args.no_observe else ""
    flags += " --observe-ab" if args.observe_ab else ""
    flags += f" --connect-mode {args.connect_mode}" if args.connect_mode != DEFAULT_MODE else ""
    flags += f" --warmups {args.warmups}" if args.warmups != 1 else ""
    warmups = "one warm-up" if args.warmups <= 1 else f"{args.warmups} warm-up rounds"
    lines = [
        f"# {'Delta Lake' if fmt == 'delta' else 'Iceberg'} write benchmark",
        "",
        f"Run {datetime.now(timezone.utc).isoformat(timespec='seconds')} by `python bench/bench_delta.py "
        f"--format {fmt} --runs {args.runs}{flags}` "
        f"({args.runs} measured runs of each path, in turn, each run starting one path later, after "
        f"{warmups} each).",
        "",
        f"A {args.rows:,}-row window ({31 * per_day:,} rows: 31 days of {per_day:,}) rewritten from a "
        f"{per_day * SOURCE_ROWS // PER_DAY:,}-row source into "
        f"{'a Delta' if fmt == 'delta' else 'an Iceberg'} table partitioned by day, "
        "on a standalone cluster on loopback (a master, two 1-core 1 GiB workers, a Spark Connect server "
        f"with Delta's and Iceberg's extensions, started as `{'` and `'.join(confs)}`"
        f"{' (one cluster each, alternated)' if len(confs) > 1 else ''}; {how}).",
        "",
        "| path | median s | min s | max s | runs |",
        "|---|---:|---:|---:|---:|",
        *[
            f"| {name} | {med[name]:.2f} | {min(v):.2f} | {max(v):.2f} | {', '.join(f'{x:.2f}' for x in v)} |"
            for name, v in times.items()
        ],
        "",
        *[line for r in ratios for line in (r, "")],
        "The operators' time by step (median of the measured runs; `prepared`: the table described and "
        "the SELECT's columns read, `checked`: the kill switch and fence "
        "before the commit; `committed`: the statement itself; `counted`: the commit found by its tag "
        "(Delta: the session's last commit, else the history; Iceberg: the snapshots) "
        "and the window's count and checksum read at its version):",
        "",
        "| operator | step | median s |",
        "|---|---|---:|",
        *[
            f"| {task} | {name} | {statistics.median(v):.2f} |"
            for task, named in phases.items()
            for name, v in named.items()
        ],
        "",
        "## Machine",
        "",
        f"- {at_start['cpu']}, {at_start['cores']} cores; Python {at_start['python']}, pyspark "
        f"{at_start['pyspark']}; load average {at_start['load_at_start']} at the start, {at_end} at the end.",
        "",
    ]
    Path(out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

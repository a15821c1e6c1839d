#!/usr/bin/env python
"""A task's first write in a fresh process: the fixed cost per task as Airflow's task runner pays it.

Run on demand (not a test), from the repository root with the project's venv::

    python bench/bench_cold.py --engine postgres --rows 1000 --repeats 7

`bench_engines.py` times calls after a warm-up in one process, so what a process pays once (the
history store's schema check, SQLAlchemy's dialect set-up, sqlglot's first use of a dialect) is not
in its figures. A task is one call in a fresh process. Here each sample is a fresh Python process
that imports Airflow and the package (as the task runner has before `execute()`), then times one
call: the operator's overwrite (checksum and history on), or the hand-written DELETE + INSERT ..
SELECT on an engine made the same way. The store is migrated before the first sample, as a
deployment's is. `--package DIR` times another checkout's package (e.g. a `git worktree` of an
older commit) with the same script. Results: bench/results/cold.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scratch import scratch_dir

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "results" / "cold.md"


def child(variant: str) -> None:
    """One sample, in its own process: import as a task has, then time one write."""
    import airflow  # noqa: F401  (the task runner has imported it before execute())

    import airflow_idempotent.operators  # noqa: F401  (first: from --package, on PYTHONPATH)

    engines = importlib.import_module("bench_engines")  # after it: it puts its own checkout first

    db = engines.Database.__new__(engines.Database)
    db.__dict__.update(json.loads(os.environ["IDEM_BENCH_DB"]))
    steps: list[dict[str, float]] = []
    if variant == "operator":
        took = engines.run_operator(db.kind, "overwrite", int(os.environ["IDEM_BENCH_RUN"]), steps, [])
    else:
        took = engines.run_hand(db, "overwrite", steps, [])
    print(json.dumps({"took": took, "statements": sum(steps[0].values())}))


def sample(variant: str, env: dict[str, str], python_path: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", variant],
        env=env | {"PYTHONPATH": python_path},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="postgres", choices=["postgres", "mariadb", "duckdb"])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--package", type=Path, default=HERE.parent, help="checkout whose package is timed")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    sys.path.insert(0, str(args.package))
    import bench_engines as engines

    started = time.perf_counter()
    home = scratch_dir("idem_bench_cold_")
    env = dict(os.environ) | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
    }
    os.environ.update(env)
    history = engines.Database("postgres", home)
    warehouse = engines.Database(args.engine, home)
    history.create()
    warehouse.create()
    env["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = json.dumps(history.conn)
    env["AIRFLOW_CONN_WAREHOUSE"] = json.dumps(warehouse.conn)
    env["IDEM_BENCH_DB"] = json.dumps({k: str(v) for k, v in vars(warehouse).items()})
    python_path = os.pathsep.join([str(args.package), str(HERE)])
    times: dict[str, list[float]] = {"operator": [], "hand-written": []}
    statements: dict[str, list[float]] = {"operator": [], "hand-written": []}
    try:
        engines.fill(warehouse, args.rows)
        sample("operator", env | {"IDEM_BENCH_RUN": "0"}, python_path)  # migrates the store
        for r in range(args.repeats):
            for variant in ("operator", "hand-written") if r % 2 == 0 else ("hand-written", "operator"):
                got = sample(variant, env | {"IDEM_BENCH_RUN": str(r + 1)}, python_path)
                times[variant].append(got["took"])
                statements[variant].append(got["statements"])
                print(f"{variant:>12} run {r + 1}: {got['took'] * 1000:.1f} ms", flush=True)
    finally:
        warehouse.drop()
        history.drop()
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    rest = {
        k: statistics.median(t - s for t, s in zip(times[k], statements[k], strict=True)) * 1000
        for k in times
    }
    commit = subprocess.run(
        ["git", "-C", str(args.package), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    row = (
        f"| {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} | {commit} | {args.engine} | {args.rows:,} | "
        f"{med['operator']:.1f} | {med['hand-written']:.1f} | {rest['operator']:.1f} | "
        f"{rest['hand-written']:.1f} | {rest['operator'] - rest['hand-written']:.1f} |"
    )
    print(row)
    if not args.output.exists():
        args.output.write_text(
            "# A task's first write in a fresh process (`python bench/bench_cold.py`)\n\n"
            f"Machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}. Each figure is the median "
            "of fresh processes (one call each, after importing Airflow and the package), operator and "
            "hand-written alternating; 'other' = the call's wall time minus its timed statements and "
            "commit. One row per run, appended.\n\n"
            "| when (UTC) | package at | engine | window rows | operator (ms) | hand-written (ms) | "
            "operator's other (ms) | hand-written's other (ms) | fixed cost per task beyond the "
            "hand-written's (ms) |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n"
        )
    with args.output.open("a") as out:
        out.write(row + "\n")
    print(f"took {(time.perf_counter() - started) / 60:.1f} min; appended to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

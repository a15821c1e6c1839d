#!/usr/bin/env python
"""Write benchmark: the operators' write path against the hand-written SQL, on PostgreSQL.

Run on demand (it is not a test): ``python bench/bench_write.py`` from the repository root, with the
project's venv. See bench/README.md for what it measures and how; it writes bench/results/write.md.

In one run, for each window size N (default 100,000 and 1,000,000 rows), against a throw-away database
``idem_bench_<hex>`` that it creates and drops:

1. the operator's path: ``strategies.overwrite(adapter, spec)`` and ``strategies.merge(adapter, spec,
   ["sale_id"])`` called directly with a ``WriteSpec``, as PartitionOverwriteOperator / MergeOperator
   call them (engine with NullPool as WarehouseHook builds it, so each call opens its own connection);
2. the hand-written baseline through plain psycopg2, one connection and one transaction per call:
   ``DELETE ..; INSERT .. SELECT`` for overwrite, ``INSERT .. SELECT .. ON CONFLICT DO UPDATE`` for merge;
3. for the record, common-sql's ``insert_rows(replace=True)`` (PostgresHook) with the same rows, already
   fetched into Python (only insert_rows is timed), in a child process;
4. ratios operator / hand-written (goal: <= 1.05);
5. the operator's peak memory (RSS high-water mark and tracemalloc peak during the call) in fresh child
   processes, to show it is flat in N.

Every measured run is a rerun of the window (the target already holds it) and is followed by
``VACUUM (ANALYZE) payouts; CHECKPOINT`` so each run starts from the same state; operator and
hand-written runs alternate (ABAB).

The modules: `write_scenario` (the scenario, the hand-written write, the machine record),
`write_measure` (the operator's path timed and its memory), `quiet_gate`, `write_report` (the page).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from quiet_gate import QuietGate
from write_measure import Instrument, child_insert_rows, child_operator, run_operator
from write_report import med, mib, render_markdown
from write_scenario import (
    REPO_ROOT,
    STRATEGIES,
    Pg,
    check_table,
    engine_for,
    hand_sql,
    machine_info,
    make_spec,
    reset,
    run_hand,
    setup_tables,
)

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "write.md"


def run_child(kind: str, cfg: Mapping[str, Any], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", kind, json.dumps(cfg)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {kind} {cfg} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------ main
def bench_size(
    pg: Pg, n: int, args: argparse.Namespace, gate: QuietGate, log: Callable[[str], None]
) -> dict[str, Any]:
    from airflow_idempotent.adapters import adapter_for

    log(f"[{n:,}] setup")
    setup = setup_tables(pg, n)
    log(
        f"[{n:,}] setup done in {setup['fill']:.1f} s (sales {setup['sales_mb']:.0f} MiB, "
        f"payouts {setup['payouts_mb']:.0f} MiB)"
    )
    adapter = adapter_for(engine_for(pg))
    inst = Instrument(adapter)
    spec = make_spec()
    sql = hand_sql()
    variants = ["operator", "hand"]
    specs = {"operator": spec}
    if not args.skip_no_checksum and hasattr(spec, "checksum"):
        variants.append("operator_nochecksum")  # the operator with checksum=False
        specs["operator_nochecksum"] = dataclasses.replace(spec, checksum=False)

    def run(side: str, strategy: str) -> dict[str, Any]:
        if side == "hand":
            return run_hand(pg, sql, strategy, n)
        return run_operator(adapter, specs[side], strategy, n, inst)

    admin = pg.connect(autocommit=True)
    runs: dict[str, Any] = {s: {"warmup": {}, "load1": [], "others_cpu": []} for s in STRATEGIES}
    for cell in runs.values():
        for side in variants:
            cell[side], cell[f"{side}_steps"] = [], []
    try:
        for strategy in STRATEGIES:  # warm-up: caches, dialect initialisation, steady physical layout
            for side in variants:
                runs[strategy]["warmup"][side] = run(side, strategy)["total"]
                reset(admin)
            log(
                f"[{n:,}] warm-up {strategy}: "
                + ", ".join(f"{side} {runs[strategy]['warmup'][side]:.3f} s" for side in variants)
            )
        for i in range(args.repeat):
            order = variants[i % len(variants) :] + variants[: i % len(variants)]  # rotate: spread drift
            for strategy in STRATEGIES:
                cell = runs[strategy]
                for side in order:
                    others = gate.wait()
                    r = run(side, strategy)
                    reset(admin)
                    cell[side].append(r["total"])
                    cell[f"{side}_steps"].append(r["steps"])
                    cell["others_cpu"].append(others)
                cell["load1"].append(os.getloadavg()[0])
                log(
                    f"[{n:,}] run {i + 1}/{args.repeat} {strategy}: "
                    + ", ".join(f"{side} {cell[side][-1]:.3f} s" for side in order)
                    + f", ratio {cell['operator'][-1] / cell['hand'][-1]:.3f}"
                )
        check_table(pg, n)
        out: dict[str, Any] = {"n": n, "setup": setup, "runs": runs, "memory": {}}
        base = {"host": pg.host, "port": pg.port, "user": pg.user, "db": pg.db, "n": n}
        if not args.skip_memory:
            for strategy in STRATEGIES:
                m = run_child("operator", {**base, "strategy": strategy})
                reset(admin)
                out["memory"][strategy] = m
                log(
                    f"[{n:,}] memory {strategy}: RSS growth cold {mib(m['cold_hwm_delta_kb'])} MiB, warm "
                    f"{mib(m['warm_hwm_delta_kb'])} MiB, tracemalloc peak {m['tracemalloc_peak_kb']:.0f} KiB"
                )
        if not args.skip_insert_rows and (n <= args.insert_rows_max):
            d = run_child(
                "insert_rows",
                {**base, "repeat": args.insert_rows_repeat},
                env={"AIRFLOW_CONN_BENCH_PG": pg.airflow_conn()},
            )
            reset(admin)
            out["insert_rows"] = d
            log(f"[{n:,}] insert_rows: fetch {d['fetch_s']:.2f} s, insert_rows {med(d['insert_s']):.2f} s")
        check_table(pg, n)
        return out
    finally:
        admin.close()
        adapter.engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="window sizes in rows, comma-separated")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per cell (default 5)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="markdown results file")
    parser.add_argument("--pg-host", default=os.environ.get("IDEM_BENCH_PG_HOST", "127.0.0.1"))
    parser.add_argument("--pg-port", type=int, default=int(os.environ.get("IDEM_BENCH_PG_PORT", "5432")))
    parser.add_argument("--pg-user", default=os.environ.get("IDEM_BENCH_PG_USER", "postgres"))
    parser.add_argument(
        "--insert-rows-1m",
        action="store_true",
        help="also time insert_rows at sizes above 100,000 rows (slow: minutes per million rows)",
    )
    parser.add_argument("--insert-rows-repeat", type=int, default=3, help="insert_rows runs (default 3)")
    parser.add_argument("--skip-insert-rows", action="store_true", help="do not time insert_rows at all")
    parser.add_argument("--skip-memory", action="store_true", help="do not run the memory children")
    parser.add_argument(
        "--skip-no-checksum",
        action="store_true",
        help="do not time the operator with checksum=False (the third, informative variant)",
    )
    parser.add_argument(
        "--quiet-cpu",
        type=float,
        default=0.25,
        help="start a timed run only when other processes use at most this many CPUs (0: no gate)",
    )
    parser.add_argument("--quiet-sample", type=float, default=0.3, help="seconds per quiet sample")
    parser.add_argument("--quiet-max-wait", type=float, default=30.0, help="max wait before one run (s)")
    parser.add_argument("--quiet-budget", type=float, default=180.0, help="max total wait (s)")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:  # AIRFLOW_HOME and the rest come from the parent's environment
        import_airflow_first()
        kind, cfg = args.child[0], json.loads(args.child[1])
        result = child_operator(cfg) if kind == "operator" else child_insert_rows(cfg)
        print(json.dumps(result))
        return 0

    airflow_home = Path(tempfile.mkdtemp(prefix="idem_bench_airflow_"))
    try:
        return bench(args, argv, airflow_home)
    finally:
        shutil.rmtree(airflow_home, ignore_errors=True)


def import_airflow_first() -> None:
    """Import Airflow before the package, as a task does. (The package's errors module imports
    airflow.sdk, whose initialisation loads the package's `airflow.policy` plugin, which imports
    errors again: importing the package first can end in a circular ImportError.)"""
    import airflow  # noqa: F401


def bench(args: argparse.Namespace, argv: Sequence[str] | None, airflow_home: Path) -> int:
    started = time.perf_counter()
    # A throw-away AIRFLOW_HOME for this process and its children: nothing lands in ~/airflow.
    os.environ.update(
        {
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home}/airflow.db",
        }
    )
    import_airflow_first()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    args.insert_rows_max = max(sizes) if args.insert_rows_1m else 100_000

    def log(msg: str) -> None:
        print(f"{time.perf_counter() - started:7.1f}s  {msg}", flush=True)

    gate = QuietGate(args.quiet_cpu, args.quiet_sample, args.quiet_max_wait, args.quiet_budget)
    db = f"idem_bench_{secrets.token_hex(6)}"
    pg = Pg(args.pg_host, args.pg_port, args.pg_user, db)
    machine = machine_info(pg)
    lint = []
    for _ in range(20):
        t0 = time.perf_counter()
        make_spec()
        lint.append(time.perf_counter() - t0)
    admin = pg.connect(db="postgres", autocommit=True)
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{db}"')
    log(f"created database {db}")
    results: list[dict[str, Any]] = []
    try:
        for n in sizes:
            results.append(bench_size(pg, n, args, gate, log))
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.close()
        log(f"dropped database {db}")
    runtime = time.perf_counter() - started
    res = {
        "command": " ".join(["python bench/bench_write.py", *(argv if argv is not None else sys.argv[1:])]),
        "args": {"repeat": args.repeat},
        "machine": machine,
        "sizes": results,
        "lint_ms": med(lint) * 1000,
        "runtime_s": runtime,
        "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "gate": {
            "limit": args.quiet_cpu,
            "sample": args.quiet_sample,
            "max_wait": args.quiet_max_wait,
            "budget": args.quiet_budget,
            "waited_s": gate.waited,
            "gave_up": gate.gave_up,
            "runs": len(gate.samples),
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render_markdown(res))
    log(f"wrote {args.output} (total {runtime / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

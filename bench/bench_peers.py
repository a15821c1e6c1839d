#!/usr/bin/env python
"""Peers in the same run: the payouts window rerun through dbt and SQLMesh, this provider, and by hand.

Run on demand (not a test), from the repository root with the project's venv::

    python bench/bench_peers.py                         # 1,000,000-row window, 3 timed reruns each
    python bench/bench_peers.py --rows 10000 --repeat 1 # quick look while developing

In one throw-away PostgreSQL database ``idem_bench_peers_<hex>`` (dropped at the end, even on failure)
the same window (2026-08-25, N rows, with N rows on each adjacent day around it) is rerun by:

* the hand-written write (``write_scenario.run_hand``: DELETE + INSERT .. SELECT, or INSERT .. ON CONFLICT,
  one psycopg2 connection and one transaction);
* this provider: PartitionOverwriteOperator / MergeOperator ``.execute(context)`` with its defaults
  (checksum and history on; ``bench_engines.run_operator``), in this process and, end to end, as a
  fresh Python process per call (import Airflow and the provider, run the operator, exit);
* dbt-core + dbt-postgres incremental models (``delete+insert``, ``merge``, ``microbatch`` rerun
  with ``--event-time-start/--event-time-end``), one ``dbt run`` process per call;
* SQLMesh ``INCREMENTAL_BY_TIME_RANGE`` and ``INCREMENTAL_BY_UNIQUE_KEY`` models, one
  ``sqlmesh plan --restate-model .. --start .. --end .. --auto-apply`` process per call.

Each peer lives in its own venv under bench/.venvs/<peer>, created from PyPI when missing; the
projects are generated into a temp dir. Every call is timed as a whole (wall clock of the process or
call) and, where the tool's log says it, as its write statements alone. Results: bench/results/peers.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
for _path in (str(BENCH), str(BENCH.parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import bench_engines  # noqa: E402  (the operators as a task runs them)
import quiet_gate  # noqa: E402
import write_scenario  # noqa: E402  (connections, hand-written write, machine record)
from peer_tools import (  # noqa: E402
    DAYS,
    DBT_MODELS,
    DBT_SCHEMA,
    SQLMESH_MODELS,
    SQLMESH_SCHEMA,
    Call,
    dbt_call,
    ensure_venv,
    sqlmesh_call,
    sqlmesh_initial_plan,
    write_dbt_project,
    write_sqlmesh_project,
)

OUTPUT = BENCH / "results" / "peers.md"
STRATEGIES = ("overwrite", "merge")


# ------------------------------------------------------------------------------------------ data
def qualified(schema: str, table: str) -> Any:
    from psycopg2 import sql

    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))


def setup_data(pg: write_scenario.Pg, n: int) -> None:
    """sales: three days of n rows (the window and its neighbours); payouts: all three written (every
    measured call is a rerun); dbt's targets: copies of payouts with the same key and index."""
    from psycopg2 import sql

    from airflow_idempotent.examples.payouts import create_payouts, create_sales

    engine = write_scenario.engine_for(pg)
    assert create_sales(engine, days=len(DAYS), per_day=n, start=DAYS[0]) == len(DAYS) * n
    create_payouts(engine)
    engine.dispose()
    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            params = {
                **write_scenario.bind_params(),
                "window_start": DAYS[0],
                "window_end": DAYS[-1] + dt.timedelta(1),
            }
            cur.execute(write_scenario.hand_sql()["insert"], params)
            cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(DBT_SCHEMA)))
            for model in DBT_MODELS.values():
                target = qualified(DBT_SCHEMA, model)
                cur.execute(sql.SQL("CREATE TABLE {} (LIKE public.payouts INCLUDING ALL)").format(target))
                cur.execute(sql.SQL("INSERT INTO {} SELECT * FROM public.payouts").format(target))
        conn.commit()
    finally:
        conn.close()


def sqlmesh_physical(pg: write_scenario.Pg, model: str) -> tuple[str, str]:
    """The physical table behind SQLMesh's prod view of `model` (schema, table)."""
    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT DISTINCT n.nspname, c.relname FROM pg_rewrite r "
                "JOIN pg_depend d ON d.objid = r.oid JOIN pg_class c ON c.oid = d.refobjid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE r.ev_class = %s::regclass AND c.oid <> r.ev_class AND c.relkind = 'r'",
                (f"{SQLMESH_SCHEMA}.{model}",),
            )
            rows = cur.fetchall()
    finally:
        conn.close()
    assert len(rows) == 1, (model, rows)
    return rows[0][0], rows[0][1]


def index_like_payouts(pg: write_scenario.Pg, schema: str, table: str) -> None:
    """Give a SQLMesh physical table the key and index the provider's target has (SQLMesh creates
    neither), so every tool writes into the same physical layout."""
    from psycopg2 import sql

    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            target = qualified(schema, table)
            cur.execute(
                "SELECT count(*) FROM pg_index WHERE indrelid = %s::regclass", (f'"{schema}"."{table}"',)
            )
            if cur.fetchone()[0] == 0:
                cur.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (sale_id)").format(target))
                cur.execute(sql.SQL("CREATE INDEX ON {} (sale_date)").format(target))
        conn.commit()
    finally:
        conn.close()


def settle(pg: write_scenario.Pg, schema: str, table: str) -> None:
    """Between calls: reclaim the rewritten window, refresh statistics, flush dirty pages."""
    from psycopg2 import sql

    admin = pg.connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute(sql.SQL("VACUUM (ANALYZE) {}").format(qualified(schema, table)))
            cur.execute("CHECKPOINT")
    finally:
        admin.close()


def day_totals(cur: Any, schema: str, table: str) -> dict[dt.date, tuple[int, Decimal]]:
    """Rows and sum(amount_eur) per sale_date of one result table (or view)."""
    from psycopg2 import sql

    cur.execute(
        sql.SQL("SELECT sale_date, count(*), sum(amount_eur) FROM {} GROUP BY sale_date").format(
            qualified(schema, table)
        )
    )
    return {day: (int(count), Decimal(total)) for day, count, total in cur.fetchall()}


def expected_totals(cur: Any) -> dict[dt.date, tuple[int, Decimal]]:
    """The v1 payouts per day straight from `sales` (flat rate 0.60, rounded to the cent per row),
    written out here rather than taken from the job's SELECT."""
    cur.execute("SELECT sale_date, count(*), sum(round(price_eur * 0.60, 2)) FROM sales GROUP BY sale_date")
    return {day: (int(count), Decimal(total)) for day, count, total in cur.fetchall()}


def mismatches(
    expected: Mapping[dt.date, tuple[int, Decimal]], got: Mapping[dt.date, tuple[int, Decimal]]
) -> list[str]:
    """Each day whose row count or amount total differs, in words (empty: the tables agree)."""
    out = []
    for day in sorted(set(expected) | set(got)):
        want, have = expected.get(day, (0, Decimal(0))), got.get(day, (0, Decimal(0)))
        if want != have:
            out.append(f"{day}: {have[0]:,} rows / {have[1]} instead of {want[0]:,} rows / {want[1]}")
    return out


# --------------------------------------------------------------------------------------- the calls
@dataclass
class Variant:
    name: str
    strategy: str
    tool: str  # hand, provider, dbt, sqlmesh
    target: tuple[str, str]
    run: Callable[[int], Call]
    calls: list[Call] = field(default_factory=list)


def hand_call(pg: write_scenario.Pg, strategy: str, n: int) -> Call:
    res = write_scenario.run_hand(pg, write_scenario.hand_sql(), strategy, n)
    steps = res["steps"]
    write = sum(
        v for k, v in steps.items() if k in ("DELETE window", "INSERT .. SELECT", "INSERT .. ON CONFLICT")
    )
    return Call(res["total"], write, {k: v for k, v in steps.items() if k != "Python and driver (rest)"})


def operator_call(strategy: str, run: int) -> Call:
    steps: list[dict[str, float]] = []
    took = bench_engines.run_operator("postgres", strategy, run, steps, [])
    write = sum(v for k, v in steps[0].items() if k in ("delete", "insert", "upsert"))
    return Call(took, write, dict(steps[0]))


def operator_process_call(strategy: str, run: int) -> Call:
    """The provider end to end: a fresh Python process imports Airflow and the provider, runs the
    operator's execute() for the window (checksum, history record) and exits."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", strategy, str(run)],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"provider process ({strategy}) failed:\n{proc.stderr[-4000:]}")
    inner = json.loads(proc.stdout.strip().splitlines()[-1])
    rest = {"rest of the process (whole - execute())": wall - inner["wall"]}
    return Call(wall, inner["write"], {"execute()": inner["wall"], **inner["detail"], **rest})


# -------------------------------------------------------------------------------------- the child
def child(strategy: str, run: int) -> int:
    """Inside the provider's end-to-end process: run the operator once and print its timing."""
    import airflow  # noqa: F401  (before the package, as a task imports them)

    call = operator_call(strategy, run)
    print(json.dumps({"wall": call.wall, "write": call.write, "detail": call.detail}))
    return 0


# --------------------------------------------------------------------------------------- the runs
def build_variants(
    pg: write_scenario.Pg, n: int, dbt_project: Path | None, sqlmesh_project: Path | None
) -> list[Variant]:
    """Every variant, by strategy: dbt's delete+insert and SQLMesh's by-time model replace the window
    (overwrite); dbt's merge and microbatch (a MERGE on PostgreSQL) and SQLMesh's by-key model merge."""
    ours = ("public", "payouts")
    variants = []
    for s in STRATEGIES:
        variants += [
            Variant(f"hand-written {s}", s, "hand", ours, lambda r, s=s: hand_call(pg, s, n)),
            Variant(f"provider {s}, in process", s, "provider", ours, lambda r, s=s: operator_call(s, r)),
            Variant(
                f"provider {s}, own process",
                s,
                "provider process",
                ours,
                lambda r, s=s: operator_process_call(s, 1000 + r),
            ),
        ]
    peers: list[tuple[str, str, str, tuple[str, str], Callable[[int], Call]]] = []
    if dbt_project is not None:
        peers += [
            (
                f"dbt {s}",
                "overwrite" if s == "delete+insert" else "merge",
                "dbt",
                (DBT_SCHEMA, m),
                lambda r, m=m, s=s: dbt_call(dbt_project, m, s, r),
            )
            for s, m in DBT_MODELS.items()
        ]
    if sqlmesh_project is not None:
        peers += [
            (
                f"SQLMesh {k}",
                "overwrite" if k == "INCREMENTAL_BY_TIME_RANGE" else "merge",
                "sqlmesh",
                sqlmesh_physical(pg, m),
                lambda r, m=m: sqlmesh_call(sqlmesh_project, m, r),
            )
            for k, m in SQLMESH_MODELS.items()
        ]
    variants += [Variant(*peer) for peer in peers]
    return variants


def result_table(v: Variant) -> tuple[str, str]:
    """Where a variant's result is read: SQLMesh's through its prod view, the others directly."""
    return (SQLMESH_SCHEMA, SQLMESH_MODELS[v.name.split()[-1]]) if v.tool == "sqlmesh" else v.target


def verify(pg: write_scenario.Pg, variants: Sequence[Variant]) -> dict[str, list[str]]:
    """Every result table against the v1 payouts computed from `sales`: rows and sum per day."""
    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            expected = expected_totals(cur)
            out = {v.name: mismatches(expected, day_totals(cur, *result_table(v))) for v in variants}
    finally:
        conn.close()
    return out


def measure(
    pg: write_scenario.Pg,
    variants: Sequence[Variant],
    repeat: int,
    gate: quiet_gate.QuietGate,
    log: Callable[[str], None],
) -> None:
    """One warm-up round, then `repeat` rounds; each round calls every variant once, in an order that
    rotates from round to round; every call is followed by VACUUM (ANALYZE) of its target + CHECKPOINT."""
    for r in range(repeat + 1):
        k = r % len(variants)
        for v in [*variants[k:], *variants[:k]]:
            if r:
                gate.wait()
            call = v.run(r)
            settle(pg, *v.target)
            if r:
                v.calls.append(call)
            write = "-" if call.write is None else f"{call.write:.3f} s"
            log(f"{'warm-up' if not r else f'run {r}/{repeat}'} {v.name}: {call.wall:.3f} s (write {write})")
        if not r:
            bad = {name: m for name, m in verify(pg, variants).items() if m}
            if bad:
                raise AssertionError(f"results differ after the warm-up: {bad}")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the window (default 1,000,000)")
    parser.add_argument("--repeat", type=int, default=3, help="timed reruns per variant after a warm-up")
    parser.add_argument("--peers", default="dbt,sqlmesh", help="peers to run, comma-separated ('' for none)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="markdown results file")
    parser.add_argument("--pg-host", default=os.environ.get("IDEM_BENCH_PG_HOST", "127.0.0.1"))
    parser.add_argument("--pg-port", type=int, default=int(os.environ.get("IDEM_BENCH_PG_PORT", "5432")))
    parser.add_argument("--pg-user", default=os.environ.get("IDEM_BENCH_PG_USER", "postgres"))
    parser.add_argument("--quiet-cpu", type=float, default=0.25, help="quiet gate: max CPUs used by others")
    parser.add_argument("--quiet-budget", type=float, default=180.0, help="quiet gate: max total wait (s)")
    parser.add_argument("--child", nargs=2, metavar=("STRATEGY", "RUN"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # the provider's end-to-end process; environment from the parent
        return child(args.child[0], int(args.child[1]))

    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"{time.perf_counter() - started:7.1f}s  {msg}", flush=True)

    peers = [p for p in args.peers.split(",") if p]
    versions = {peer: ensure_venv(peer, log) for peer in peers}
    home = Path(tempfile.mkdtemp(prefix="idem_bench_peers_"))
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        }
    )
    import airflow  # noqa: F401  (before the package, as a task imports them)

    name = f"idem_bench_peers_{secrets.token_hex(4)}"
    pg = write_scenario.Pg(args.pg_host, args.pg_port, args.pg_user, name)
    history = write_scenario.Pg(args.pg_host, args.pg_port, args.pg_user, f"{name}_history")
    os.environ["AIRFLOW_CONN_WAREHOUSE"] = pg.airflow_conn()
    os.environ["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = history.airflow_conn()
    machine = write_scenario.machine_info(pg)
    machine["uptime at start"] = uptime()
    admin = pg.connect(db="postgres", autocommit=True)
    gate = quiet_gate.QuietGate(args.quiet_cpu, 0.3, 30.0, args.quiet_budget)
    try:
        with admin.cursor() as cur:
            for db in (pg.db, history.db):
                cur.execute(f'CREATE DATABASE "{db}"')
        log(f"created databases {pg.db}, {history.db}; setup of {args.rows:,} rows a day x 3 days")
        setup_data(pg, args.rows)
        dbt_project = write_dbt_project(home, pg) if "dbt" in peers else None
        sqlmesh_project = write_sqlmesh_project(home, pg) if "sqlmesh" in peers else None
        if sqlmesh_project is not None:
            sqlmesh_initial_plan(sqlmesh_project)
            for model in SQLMESH_MODELS.values():
                index_like_payouts(pg, *sqlmesh_physical(pg, model))
        variants = build_variants(pg, args.rows, dbt_project, sqlmesh_project)
        for v in variants:
            settle(pg, *v.target)
        log("setup done; measuring")
        measure(pg, variants, args.repeat, gate, log)
        checks = verify(pg, variants)
        debug_calls = {}
        if sqlmesh_project is not None:  # SQLMesh logs its statements only with --debug: one such call each
            for v in variants:
                if v.tool == "sqlmesh":
                    debug_calls[v.name] = sqlmesh_call(
                        sqlmesh_project, SQLMESH_MODELS[v.name.split()[-1]], 99, True
                    )
                    settle(pg, *v.target)
            checks = {k: [*checks[k], *m] for k, m in verify(pg, variants).items()}
    finally:
        with admin.cursor() as cur:
            for db in (pg.db, history.db):
                cur.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.close()
        shutil.rmtree(home, ignore_errors=True)
        log(f"dropped databases {pg.db}, {history.db}")
    machine["uptime at end"] = uptime()
    res = {
        "command": " ".join(["python bench/bench_peers.py", *(argv if argv is not None else sys.argv[1:])]),
        "rows": args.rows,
        "repeat": args.repeat,
        "machine": machine,
        "versions": versions,
        "gate": {"waited_s": gate.waited, "gave_up": gate.gave_up, "runs": len(gate.samples)},
        "runtime_s": time.perf_counter() - started,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(res, variants, checks, debug_calls))
    log(f"wrote {args.output}")
    failed = {k: m for k, m in checks.items() if m}
    if failed:
        print(f"result tables differ: {failed}", file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------------------------- reporting
def med(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def walls(v: Variant) -> list[float]:
    return [c.wall for c in v.calls]


def writes(v: Variant, debug_calls: Mapping[str, Call]) -> list[float]:
    if v.name in debug_calls and debug_calls[v.name].write is not None:
        return [float(debug_calls[v.name].write or 0.0)]
    return [c.write for c in v.calls if c.write is not None]


def detail(v: Variant, debug_calls: Mapping[str, Call]) -> str:
    calls = [debug_calls[v.name]] if v.name in debug_calls else v.calls
    keys = sorted({k for c in calls for k in c.detail})
    return ", ".join(f"{k} {med([c.detail.get(k, 0.0) for c in calls]) * 1000:,.0f}" for k in keys)


def render(
    res: Mapping[str, Any],
    variants: Sequence[Variant],
    checks: Mapping[str, list[str]],
    debug_calls: Mapping[str, Call],
) -> str:
    m = res["machine"]
    lines = [
        "# Peers in the same run: dbt and SQLMesh against this provider and the hand-written write",
        "",
        f"Generated by `{res['command']}` on {m['date']} in {res['runtime_s'] / 60:.1f} min: a "
        f"{res['rows']:,}-row window (2026-08-25, with {res['rows']:,} rows on each adjacent day) rerun "
        f"by every tool on the same PostgreSQL database, {res['repeat']} timed reruns each after one "
        "warm-up, in an order rotating from round to round; medians, minimums in brackets. Method: "
        "bench/README.md.",
        "",
        "**Machine**: "
        + "; ".join(
            f"{k} {m[k]}"
            for k in ("nproc", "memory", "cpu", "kernel", "postgresql", "pg settings", "airflow_idempotent")
            if k in m
        )
        + ".",
        "",
        f"**Load**: `{m['uptime at start']}` at start, `{m['uptime at end']}` at end. The machine is "
        "shared with other engineers' test runs: ratios between tools measured in this one run mean more "
        f"than the absolute times. Quiet gate: waited {res['gate']['waited_s']:.0f} s in all, "
        f"{res['gate']['gave_up']} of {res['gate']['runs']} calls started without quiet.",
        "",
        "**Peers** (each in its own venv from PyPI): "
        + "; ".join(", ".join(f"{d} {ver}" for d, ver in vs.items()) for vs in res["versions"].values())
        + f". **Ours**: {m.get('packages', '')}.",
        "",
    ]
    verdicts = []
    for strategy in STRATEGIES:
        group = [v for v in variants if v.strategy == strategy and v.calls]
        by_tool = {v.tool: v for v in group}
        hand, proc, inproc = by_tool.get("hand"), by_tool.get("provider process"), by_tool.get("provider")
        peers = [v for v in group if v.tool in ("dbt", "sqlmesh")]
        lines += [
            f"## {strategy}",
            "",
            "| variant | whole call (s) | write statements (s) | whole / hand-written | "
            "whole / provider's process | write statements / provider's | result = scenario |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for v in group:
            w, ws = walls(v), writes(v, debug_calls)
            cells = [
                f"{med(w):.3f} ({min(w):.3f})",
                f"{med(ws):.3f}" if ws else "-",
                f"{med(w) / med(walls(hand)):.2f}x" if hand else "-",
                f"{med(w) / med(walls(proc)):.2f}x" if proc else "-",
                f"{med(ws) / med(writes(inproc, debug_calls)):.2f}x" if ws and inproc else "-",
                "yes" if not checks.get(v.name) else "NO: " + "; ".join(checks[v.name]),
            ]
            lines.append(f"| {v.name} | " + " | ".join(cells) + " |")
        lines.append("")
        if peers and proc:
            fastest = min(peers, key=lambda v: med(walls(v)))
            ratio = med(walls(fastest)) / med(walls(proc))
            verdicts.append((strategy, fastest.name, ratio))
            lines += [
                f"Fastest peer end to end: **{fastest.name}**, {ratio:.2f}x the provider's process "
                f"(goal >= 1.8x): **{'met' if ratio >= 1.8 else 'not met'}**.",
                "",
            ]
    lines += [
        "## Statements, median ms per call",
        "",
        "| variant | statements by kind (ms) |",
        "|---|---|",
        *[f"| {v.name} | {detail(v, debug_calls)} |" for v in variants if v.calls],
        "",
        *[
            f"SQLMesh's restatement of {v.name.split()[-1]} for 2026-08-25 ran "
            f"{(debug_calls.get(v.name) or v.calls[-1]).note}."
            for v in variants
            if v.tool == "sqlmesh" and v.calls
        ],
        "",
        "Hand-written and provider: the write's own statements (connect and commit listed for the "
        "hand-written one; the provider's kinds as bench_engines.py times them). dbt: every statement "
        "of its JSON debug log (`SQLQueryStatus` elapsed), and `run_results execute` (the model's "
        "execute phase from run_results.json). SQLMesh: from one extra `--debug` call per model after "
        "the timed ones: the write is the evaluation `duration` its console prints; the kinds are each "
        "`Executing SQL` line of its log until the next log line (millisecond timestamps, no durations: "
        "indicative only). The provider's process: `execute()` is the operator call inside it.",
        "",
        "## For the README",
        "",
        "| what | figure | goal |",
        "|---|---|---|",
    ]
    for strategy, name, ratio in verdicts:
        lines.append(
            f"| peers, {strategy} of a {res['rows']:,}-row window end to end: fastest peer ({name}) / "
            f"provider's process | {ratio:.2f}x | >= 1.8x |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

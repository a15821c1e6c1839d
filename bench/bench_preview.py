#!/usr/bin/env python
"""Rerun preview benchmark: ``airflow-idempotent rerun --dry-run`` of a 1,000,000-row window on PostgreSQL.

Run on demand (it is not a test): ``python bench/bench_preview.py [--rows N] [--repeat R] [--no-command]``
from the repository root with the project's venv; it writes bench/results/preview.md. Goal (issue 32):
the preview within 1.5x of the write it previews.

Against a throw-away database ``idem_bench_<hex>`` (created and dropped): ``sales`` holds one day of
N rows, ``payouts`` that window written under policy v1 by the operator's own path
(``strategies.overwrite``) plus N rows on each neighbouring day. Then R rounds, on the same data:

0. the write: ``strategies.overwrite`` of the window under v1, committed (it deletes and re-inserts
   the same rows), then ``VACUUM (ANALYZE) payouts`` untimed, so the previews read the table as the
   setup left it;
1. ``preview_write`` of the unchanged window (v1), the preview of that very write: stage N rows,
   check keys, checksum both sides, the guard's diff by key, sample keys, drop; the result must be
   0 added / removed / changed;
2. the same after a policy change (v2): the preview must report the rows the scenario's formula changes;
3. unless ``--no-command``: the whole command, ``airflow-idempotent rerun --dag payouts_overwrite
   --window DAY --dry-run --json`` (DagBag parse of dags/, lint of the file, templating, the preview
   of both tasks), as a child process.

Each preview's statements are timed by SQLAlchemy's cursor events and summed per step (`step_of`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scratch import scratch_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "preview.md"
DAY = dt.date(2026, 8, 25)
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}


def machine() -> list[str]:
    with open("/proc/meminfo") as fh:
        kb = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    with open("/proc/cpuinfo") as fh:
        models = sorted({line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")})
    load = os.getloadavg()
    return [
        f"- {os.cpu_count()} cores ({', '.join(models) or platform.processor()}), {kb / 2**20:.1f} GiB RAM, "
        f"kernel {platform.release()}",
        f"- load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (the machine is shared)",
        f"- Python {platform.python_version()}",
    ]


def spec(policy: str) -> Any:
    import pendulum

    from airflow_idempotent.examples.payouts import PAYOUT_SQL
    from airflow_idempotent.lint import check_deterministic
    from airflow_idempotent.window import Window
    from airflow_idempotent.write_spec import WriteSpec

    start = pendulum.datetime(DAY.year, DAY.month, DAY.day, tz="UTC")
    return WriteSpec(
        table="payouts",
        query=check_deterministic(PAYOUT_SQL, "postgres"),
        window=Window(start, start.add(days=1), source="granularity", tz="UTC"),
        partition_column="sale_date",
        params={"policy_version": policy},
    )


def expected_changed(n: int) -> int:
    """Sales of the window whose payout differs under v2 (price >= 400.00 pays 0.55), by the formula."""
    from decimal import ROUND_HALF_UP, Decimal

    def pay(i: int, rate: str) -> Decimal:
        price = (Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")).quantize(Decimal("0.01"))
        return (price * Decimal(rate)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

    changed = 0
    for i in range(1, n + 1):
        price = Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")
        if price >= 400 and pay(i, "0.55") != pay(i, "0.60"):
            changed += 1
    return changed


#: The preview's steps, in the order `preview_write` runs them; a statement is put in one by its text.
STEPS = ("staging", "key check", "checksums", "sums", "diff", "sample", "other")


def step_of(statement: str) -> str:
    """Which step of the preview a statement belongs to (bench bookkeeping, by the SQL's text)."""
    text = " ".join(statement.split()).upper()
    if text.startswith(("CREATE TEMPORARY", "INSERT INTO", "ANALYZE", "CREATE INDEX", "DROP")):
        return "staging"
    if " HAVING " in text or "COUNT(DISTINCT" in text:
        return "key check"
    if "EXTENDED(" in text:
        return "checksums"
    if " LIMIT " in text:
        return "sample"
    if " JOIN " in text:
        return "diff"
    if text.startswith("SELECT COUNT(*), COALESCE(SUM("):
        return "sums"
    return "other"


class StatementClock:
    """Seconds per preview step, from SQLAlchemy's cursor events, while `on` is set."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.on = False
        self.steps: dict[str, float] = {}
        self._start = 0.0

        @event.listens_for(engine, "before_cursor_execute")
        def _before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            self._start = time.perf_counter()

        @event.listens_for(engine, "after_cursor_execute")
        def _after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if self.on:
                step = step_of(statement)
                self.steps[step] = self.steps.get(step, 0.0) + time.perf_counter() - self._start

    def run(self, fn: Any, *args: Any) -> tuple[Any, float, dict[str, float]]:
        """fn(*args), its wall seconds and its statements' seconds per step."""
        self.steps, self.on = {}, True
        try:
            t = time.perf_counter()
            out = fn(*args)
            return out, time.perf_counter() - t, dict(self.steps)
        finally:
            self.on = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--no-command", action="store_true", help="skip the child `rerun --dry-run` process")
    args = parser.parse_args(argv)

    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    from airflow_idempotent.adapters import adapter_for
    from airflow_idempotent.examples.payouts import create_payouts, create_sales
    from airflow_idempotent.preview import preview_write
    from airflow_idempotent.strategies import overwrite

    header = machine()
    name = f"idem_bench_{secrets.token_hex(4)}"
    base = f"postgresql+psycopg2://{PG['user']}@{PG['host']}:{PG['port']}"
    admin = sa.create_engine(f"{base}/postgres", isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        pg_version = conn.execute(sa.text("SHOW server_version")).scalar_one()
    engine = sa.create_engine(f"{base}/{name}", poolclass=NullPool)
    results: dict[str, list[float]] = {"write": [], "unchanged": [], "policy_change": [], "command": []}
    step_runs: dict[str, list[dict[str, float]]] = {"unchanged": [], "policy_change": []}
    loads: list[float] = []
    try:
        t0 = time.perf_counter()
        create_sales(engine, days=1, per_day=args.rows, start=DAY)
        create_payouts(engine)
        adapter = adapter_for(engine)
        overwrite(adapter, spec("v1"))
        with engine.begin() as conn:  # neighbouring days, so the window is a slice of a bigger table
            for offset, day in (
                (args.rows, DAY - dt.timedelta(days=1)),
                (2 * args.rows, DAY + dt.timedelta(days=1)),
            ):
                conn.execute(
                    sa.text(
                        "INSERT INTO payouts (sale_id, sale_date, amount_eur, rate) "
                        "SELECT :o + i, :d, 1.00, 0.60 FROM generate_series(1::bigint, :n) AS t(i)"
                    ),
                    {"o": offset, "d": day, "n": args.rows},
                )
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM (ANALYZE) payouts"))
            conn.execute(sa.text("VACUUM (ANALYZE) sales"))
        setup = time.perf_counter() - t0
        changed = expected_changed(args.rows)

        home = str(scratch_dir("idem_bench_home_"))
        env = {
            **os.environ,
            "AIRFLOW_HOME": home,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_WAREHOUSE": json.dumps(
                {
                    "conn_type": "postgres",
                    "host": PG["host"],
                    "port": PG["port"],
                    "login": PG["user"],
                    "schema": name,
                }
            ),
            "AIRFLOW_CONN_IDEMPOTENT_HISTORY": json.dumps({"conn_type": "sqlite", "host": f"{home}/h.db"}),
        }
        command = [
            str(Path(sys.executable).with_name("airflow-idempotent")),
            "rerun", "--dag", "payouts_overwrite", "--window", DAY.isoformat(), "--dry-run", "--json",
            "--dags-folder", str(REPO_ROOT / "dags"),
        ]  # fmt: skip
        clock = StatementClock(engine)
        for _ in range(args.repeat):
            loads.append(os.getloadavg()[0])
            # The write it previews: the operator's own overwrite of the window under v1, committed
            # (it rewrites the same rows), then VACUUM (ANALYZE), not timed, so every preview reads
            # the table as the setup left it, without the write's dead tuples.
            t = time.perf_counter()
            overwrite(adapter, spec("v1"))
            results["write"].append(time.perf_counter() - t)
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(sa.text("VACUUM (ANALYZE) payouts"))
            same, seconds, steps = clock.run(preview_write, adapter, spec("v1"), ["sale_id"], ["amount_eur"])
            results["unchanged"].append(seconds)
            step_runs["unchanged"].append(steps)
            assert same.diff is not None and (same.diff.added, same.diff.removed, same.diff.changed) == (
                0,
                0,
                0,
            )
            v2, seconds, steps = clock.run(preview_write, adapter, spec("v2"), ["sale_id"], ["amount_eur"])
            results["policy_change"].append(seconds)
            step_runs["policy_change"].append(steps)
            assert v2.diff is not None and v2.diff.changed == changed, (v2.diff, changed)
            if args.no_command:
                continue
            t = time.perf_counter()
            proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
            results["command"].append(time.perf_counter() - t)
            assert proc.returncode == 0, proc.stderr[-2000:]
            doc = json.loads(proc.stdout)
            (write,) = [task for task in doc["tasks"] if task["task_id"] == "write_payouts"]
            assert write["preview"]["diff"]["unchanged"] == args.rows, write
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    def shown(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    write = statistics.median(results["write"])

    def row(what: str, values: list[float], ratio: bool = True, goal: bool = True) -> str:
        median = statistics.median(values)
        if not ratio:
            return f"| {what} | {median:.2f} s | {shown(values)} | | |"
        verdict = ("met" if median <= 1.5 * write else "MISSED") if goal else "(not the goal's figure)"
        return f"| {what} | {median:.2f} s | {shown(values)} | {median / write:.2f}x | {verdict} |"

    def step_row(step: str) -> str:
        cells = [
            f"{statistics.median([run.get(step, 0.0) for run in step_runs[kind]]):.2f} s"
            for kind in ("unchanged", "policy_change")
        ]
        return f"| {step} | {' | '.join(cells)} |"

    policy = results["policy_change"]
    lines = [
        f"# Rerun preview: a window of {args.rows:,} rows on PostgreSQL",
        "",
        f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC by `python bench/bench_preview.py"
        f" --rows {args.rows} --repeat {args.repeat}{' --no-command' if args.no_command else ''}`.",
        "",
        *header,
        f"- load average (1 min) before each round: {shown(loads)}",
        f"- PostgreSQL {pg_version} on 127.0.0.1 (same machine); "
        f"setup (sales + v1 write + neighbours) {setup:.1f} s",
        "",
        f"`payouts` holds the window ({args.rows:,} rows, written by `strategies.overwrite` under v1) and "
        f"{args.rows:,} rows on each neighbouring day. Goal (issue 32): the preview within 1.5x of the "
        "write it previews. Each round runs, on the same data, the write (the operator's "
        "`strategies.overwrite` of the window under v1, committed: it deletes and re-inserts the same "
        "rows; then `VACUUM (ANALYZE) payouts`, not timed, so the previews read the table as the setup "
        "left it), the preview of that write, and the preview of a v2 write.",
        "",
        "| what | median | runs | preview / write | goal 1.5x |",
        "|---|---|---|---|---|",
        row("the write: `strategies.overwrite` of the window (v1)", results["write"], ratio=False),
        row("`preview_write`, unchanged window (0 added / removed / changed)", results["unchanged"]),
        row(f"`preview_write`, policy v1 -> v2 ({changed:,} changed, as the formula says)", policy),
    ]
    if results["command"]:
        lines.append(
            row(
                "`airflow-idempotent rerun --dag payouts_overwrite --dry-run --json` (process, DagBag, lint)",
                results["command"],
                goal=False,
            )
        )
    lines += [
        "",
        "Seconds per preview step (median of the rounds; each statement timed by SQLAlchemy's cursor "
        "events and put in a step by its text: staging = CREATE TEMPORARY / INSERT .. SELECT / DROP, "
        "key check = the count of rows, distinct and NULL keys (and the GROUP BY .. HAVING naming "
        "them, if any), checksums = both sides' hashes (with the measures' sums since they share the "
        "pass), sums = COUNT and SUM of the measures on their own, diff = the join by key, "
        "sample = the LIMITed key samples, other = catalog and session statements):",
        "",
        "| step | unchanged | policy v1 -> v2 |",
        "|---|---|---|",
        *[step_row(step) for step in STEPS],
        "",
        "The goal is the preview's (`preview_write`, the 15 s of issue 32); the command's row adds a "
        "Python process with Airflow's imports, the DagBag parse, the lint and the templating around "
        "the previews of the DAG's tasks.",
        "",
        "Each preview stages the window's rows in a TEMPORARY table, checks its keys, checksums both sides, "
        "runs the guard's diff by key and samples 10 changed / added / removed keys, then drops the table "
        "and rolls back. The command also parses dags/ with DagBag, lints the file, renders the templates.",
        "",
    ]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

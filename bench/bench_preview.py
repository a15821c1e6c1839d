#!/usr/bin/env python
"""Rerun preview benchmark: ``airflow-idempotent rerun --dry-run`` of a 1,000,000-row window on PostgreSQL.

Run on demand (it is not a test): ``python bench/bench_preview.py [--rows N] [--repeat R]`` from the
repository root with the project's venv; it writes bench/results/preview.md. Goal: under 60 s.

Against a throw-away database ``idem_bench_<hex>`` (created and dropped): ``sales`` holds one day of
N rows, ``payouts`` that window written under policy v1 by the operator's own path
(``strategies.overwrite``) plus N rows on each neighbouring day. Then, R times each, alternating:

1. ``preview_write`` of the unchanged window (v1): stage N rows, checksum both sides, the guard's diff
   by key, sample keys, drop; the result must be 0 added / removed / changed;
2. the same after a policy change (v2): the preview must report the rows the scenario's formula changes;
3. the whole command, ``airflow-idempotent rerun --dag payouts_overwrite --window DAY --dry-run --json``
   (DagBag parse of dags/, lint of the file, templating, the preview of both tasks), as a child process.
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
import tempfile
import time
from pathlib import Path
from typing import Any

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
    from airflow_idempotent.strategies import WriteSpec
    from airflow_idempotent.window import Window

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
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
    results: dict[str, list[float]] = {"unchanged": [], "policy_change": [], "command": []}
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

        home = tempfile.mkdtemp(prefix="idem_bench_home_")
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
        for _ in range(args.repeat):
            t = time.perf_counter()
            same = preview_write(adapter, spec("v1"), ["sale_id"], ["amount_eur"])
            results["unchanged"].append(time.perf_counter() - t)
            assert same.diff is not None and (same.diff.added, same.diff.removed, same.diff.changed) == (
                0,
                0,
                0,
            )
            t = time.perf_counter()
            v2 = preview_write(adapter, spec("v2"), ["sale_id"], ["amount_eur"])
            results["policy_change"].append(time.perf_counter() - t)
            assert v2.diff is not None and v2.diff.changed == changed, (v2.diff, changed)
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

    def row(what: str, values: list[float]) -> str:
        shown = ", ".join(f"{v:.2f}" for v in values)
        verdict = "met" if statistics.median(values) < 60 else "MISSED"
        return f"| {what} | {statistics.median(values):.2f} s | {shown} | {verdict} |"

    policy = results["policy_change"]
    lines = [
        f"# Rerun preview: a window of {args.rows:,} rows on PostgreSQL",
        "",
        f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC by `python bench/bench_preview.py"
        f" --rows {args.rows} --repeat {args.repeat}`.",
        "",
        *header,
        f"- PostgreSQL {pg_version} on 127.0.0.1 (same machine); "
        f"setup (sales + v1 write + neighbours) {setup:.1f} s",
        "",
        f"`payouts` holds the window ({args.rows:,} rows, written by `strategies.overwrite` under v1) and "
        f"{args.rows:,} rows on each neighbouring day. Goal: under 60 s.",
        "",
        "| what | median | runs | goal |",
        "|---|---|---|---|",
        row("`preview_write`, unchanged window (0 added / removed / changed)", results["unchanged"]),
        row(f"`preview_write`, policy v1 -> v2 ({changed:,} changed, as the formula says)", policy),
        row(
            "`airflow-idempotent rerun --dag payouts_overwrite --dry-run --json` (process)",
            results["command"],
        ),
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

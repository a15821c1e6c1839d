"""Benchmark: what the fence costs a write (not a test; run on demand).

Per history store (the embedded SQLite file, PostgreSQL, MariaDB), in one warm process, as the
operator calls them (`history.fences.take` / `check`, one window, the store's pooled engine):

- take: try 1 of a new task instance raises a window's fence (the first write of a window);
- raise: try 2 of that task instance raises the same fence (a retry);
- check: try 2 reads the fence again before its commit.

each on the pool's warm connection, and again each on a new connection (the pool emptied before
the call, untimed: what a task's first call to a store pays).

Median, minimum and maximum milliseconds over `--reps` calls of each (after 20 warm-up calls),
written as a section of `--out` (default bench/results/fence.md) under `--label`: a section of
the same label is replaced, others kept, so one file holds the figures before and after a change.

    python bench/bench_fence.py --label before [--reps 300] [--stores sqlite,postgres,mariadb]

Creates and drops its own databases: PostgreSQL at 127.0.0.1:5432 (user postgres), MariaDB at
127.0.0.1:3306 (user root), both without password, as the tests use them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WARMUP = 20
PG_ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
MARIADB_ADMIN = "mysql+pymysql://root@127.0.0.1:3306/"


@contextmanager
def store_conn(kind: str, scratch: Path) -> Iterator[str]:
    """The history connection's JSON for a fresh store of `kind`, dropped afterwards."""
    db = f"idem_bench_fence_{uuid.uuid4().hex[:8]}"
    if kind == "sqlite":
        yield json.dumps({"conn_type": "sqlite", "host": str(scratch / f"{db}.db")})
        return
    admin = sa.create_engine(PG_ADMIN if kind == "postgres" else MARIADB_ADMIN, isolation_level="AUTOCOMMIT")
    quoted = f'"{db}"' if kind == "postgres" else f"`{db}`"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {quoted}")
    try:
        if kind == "postgres":
            yield json.dumps(
                {
                    "conn_type": "postgres",
                    "host": "127.0.0.1",
                    "port": 5432,
                    "login": "postgres",
                    "schema": db,
                }
            )
        else:
            yield json.dumps(
                {"conn_type": "mysql", "host": "127.0.0.1", "port": 3306, "login": "root", "schema": db}
            )
    finally:
        with admin.connect() as conn:
            force = " WITH (FORCE)" if kind == "postgres" else ""
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quoted}{force}")
        admin.dispose()


def measure(conn_json: str, reps: int, cold: bool) -> dict[str, list[float]]:
    """Milliseconds per take (new task instance), raise (its try 2) and check (try 2 before commit);
    `cold`: each call on a new connection (the pool emptied before it, untimed)."""
    os.environ["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = conn_json
    from airflow_idempotent.history import fences
    from airflow_idempotent.history.store import HistoryStore
    from airflow_idempotent.identity import AttemptIdentity
    from airflow_idempotent.window import Window

    store = HistoryStore.from_airflow()
    store.migrate()
    window = Window(
        start=datetime(2026, 8, 25, tzinfo=timezone.utc),
        end=datetime(2026, 8, 26, tzinfo=timezone.utc),
        source="bench",
    )
    times: dict[str, list[float]] = {"take": [], "raise": [], "check": []}
    suffix = " (new connection)" if cold else ""

    def timed(call: Callable[..., None], identity: AttemptIdentity) -> float:
        if cold:
            store.engine.dispose()
        started = time.perf_counter()
        call(store, identity, "warehouse:payouts", [window])
        return (time.perf_counter() - started) * 1000

    for n in range(reps + WARMUP):
        run_id = f"scheduled__{uuid.uuid4().hex}"
        first = AttemptIdentity("bench_fence", run_id, "write", -1, 1, "scheduled")
        second = AttemptIdentity("bench_fence", run_id, "write", -1, 2, "scheduled")
        took = timed(fences.take, first)
        raised = timed(fences.take, second)
        checked = timed(fences.check, second)
        if n >= WARMUP:
            times["take"].append(took)
            times["raise"].append(raised)
            times["check"].append(checked)
    times = {f"{call}{suffix}": values for call, values in times.items()}
    assert fences.holder(store, second, "warehouse:payouts", window) == 2
    store.engine.dispose()
    return times


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor() or "unknown CPU",
    )
    mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{platform.node()}: {os.cpu_count()} cores ({cpu}), {int(mem) // 1024 // 1024} GiB, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"load average at start {load}"
    )


def server_versions() -> str:
    out = []
    for kind, url in (("PostgreSQL", PG_ADMIN), ("MariaDB", MARIADB_ADMIN)):
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            version = str(conn.exec_driver_sql("SELECT version()").scalar())
            out.append((version if version.startswith(kind) else f"{kind} {version}").split(" on ")[0])
        engine.dispose()
    out.append(f"SQLite {__import__('sqlite3').sqlite_version}")
    return "; ".join(out)


def section(label: str, reps: int, results: dict[str, dict[str, list[float]]]) -> str:
    commit = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%h %s"], capture_output=True, text=True, check=False
    ).stdout.strip()
    lines = [
        f"## {label}",
        "",
        f"- code: `{commit[:100]}`" + (" (with uncommitted changes)" if _dirty() else ""),
        f"- machine: {machine()}",
        f"- servers: {server_versions()}",
        f"- when: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {reps} calls of each "
        f"after {WARMUP} warm-up",
        "",
        "| store | call | median ms | min ms | max ms |",
        "|---|---|---:|---:|---:|",
    ]
    for kind, times in results.items():
        for call, values in times.items():
            median, low, high = statistics.median(values), min(values), max(values)
            lines.append(f"| {kind} | {call} | {median:.2f} | {low:.2f} | {high:.2f} |")
    return "\n".join(lines) + "\n"


def _dirty() -> bool:
    status = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "airflow_idempotent"],
        capture_output=True,
        text=True,
        check=False,
    )
    return bool(status.stdout.strip())


HEADER = """# Fence cost per call (`bench/bench_fence.py`)

take: try 1 of a new task instance raises one window's fence; raise: its try 2 raises it again;
check: try 2 reads it before commit. One process per run, the store's pooled engine, its warm
connection or (new connection) a connection opened for the call.
"""


def write(out: Path, label: str, text: str) -> None:
    old = out.read_text() if out.exists() else HEADER
    parts = re.split(r"(?m)^(?=## )", old)
    kept = [p for p in parts if not p.startswith(f"## {label}\n")]
    if len(kept) == len(parts):
        kept.append(text)
    else:
        kept = [text if p.startswith(f"## {label}\n") else p for p in parts]
    out.write_text("\n\n".join(p.rstrip("\n") for p in kept) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--label", required=True, help="section title, e.g. 'before (main)' or 'after'")
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--stores", default="sqlite,postgres,mariadb")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "fence.md")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="idem_bench_fence_") as scratch:
        for kind in args.stores.split(","):
            with store_conn(kind, Path(scratch)) as conn_json:
                results[kind] = measure(conn_json, args.reps, cold=False)
                results[kind].update(measure(conn_json, args.reps, cold=True))
            medians = ", ".join(f"{c} {statistics.median(v):.2f} ms" for c, v in results[kind].items())
            print(f"{kind}: {medians}", flush=True)
    text = section(args.label, args.reps, results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write(args.out, args.label, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

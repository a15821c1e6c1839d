"""Benchmark: what run history costs (not a test; run on demand).

1. Added time per task attempt, in-process: the listener's running + success hooks for one
   attempt plus the operator's window-write record, median over N attempts (goal <= 10 ms),
   against PostgreSQL (production) and the embedded SQLite file.
2. The history query for one DAG's windows (`window_history`, what the CLI and the page run)
   over 1,000,000 attempt rows in PostgreSQL (goal <= 50 ms), median over repeats.

    python bench/bench_history.py [--attempts 200] [--rows 1000000] [--out bench/results/history.md]

Creates and drops its own PostgreSQL database (127.0.0.1:5432, user postgres).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from scratch import scratch_dir

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WARMUP = 20
PG = "postgresql+psycopg2://postgres@127.0.0.1:5432/{db}"


class FakeRuntimeTI:
    """The attributes the worker-side listener reads from a RuntimeTaskInstance."""

    def __init__(self, n: int) -> None:
        self.dag_id = "bench_dag"
        self.run_id = f"scheduled__{n}"
        self.task_id = "write_payouts"
        self.map_index = -1
        self.try_number = 1
        self.state = "running"
        self.hostname = "bench-host"

    def get_template_context(self) -> dict[str, Any]:
        class Run:
            run_type = "scheduled"
            logical_date = datetime(2026, 8, 25, tzinfo=timezone.utc)

        return {"dag_run": Run(), "logical_date": Run.logical_date}


def per_attempt(conn_json: str, attempts: int) -> list[float]:
    """Milliseconds per attempt: running hook + success hook + one window-write record."""
    os.environ["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = conn_json
    from airflow_idempotent.history.spool import SafeHistory
    from airflow_idempotent.history.store import WriteRecord, utcnow
    from airflow_idempotent.plugins import listener

    listener._state.history = None  # a fresh SafeHistory on this connection
    hooks = listener.HistoryListener()
    writes = SafeHistory()
    times: list[float] = []
    for n in range(attempts + WARMUP):  # warm-up: migration check, first connections, caches
        ti = FakeRuntimeTI(n)
        started = time.perf_counter()
        hooks.on_task_instance_running(None, ti)
        writes.record(
            WriteRecord(
                dag_id=ti.dag_id,
                run_id=ti.run_id,
                task_id=ti.task_id,
                map_index=-1,
                try_number=1,
                target="warehouse:payouts",
                window_start=datetime(2026, 8, 25, tzinfo=timezone.utc) + timedelta(days=n),
                window_end=datetime(2026, 8, 26, tzinfo=timezone.utc) + timedelta(days=n),
                window_label=f"w{n}",
                strategy="overwrite",
                status="written",
                fingerprint="f" * 64,
                written_at=utcnow(),
                checksum=f"2000:{n}",
                row_count=2000,
            )
        )
        ti.state = "success"
        hooks.on_task_instance_success("running", ti)
        if n >= WARMUP:
            times.append((time.perf_counter() - started) * 1000)
    return times


def fill_attempts(url: str, rows: int) -> float:
    """rows attempt records (1,000 DAGs x runs x 2 events) and a write per run, set-based."""
    from airflow_idempotent.history.store import HistoryStore

    HistoryStore._MIGRATED_URLS.clear()  # the database was dropped and created again
    store = HistoryStore(sa.create_engine(url))
    store.migrate()
    started = time.monotonic()
    runs = rows // 2
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO idem_task_attempt (dag_id, run_id, task_id, map_index, try_number, event, at, "
                "state, source) SELECT 'dag_' || lpad((i % 1000)::text, 4, '0'), 'run_' || i, 'write', "
                "-1, 1, "
                "e.event, TIMESTAMPTZ '2026-01-01' + (i || ' minutes')::interval, e.event, 'worker' "
                "FROM generate_series(1, :runs) AS i CROSS JOIN (VALUES ('running'), ('success')) AS e(event)"
            ),
            {"runs": runs},
        )
        conn.execute(
            sa.text(
                "INSERT INTO idem_window_write (dag_id, run_id, task_id, map_index, try_number, target, "
                "window_start, window_end, window_label, strategy, status, fingerprint, written_at, "
                "package_version, ordinal, dataset_version, nondeterministic, checksum, row_count) "
                "SELECT 'dag_' || lpad((i % 1000)::text, 4, '0'), 'run_' || i, 'write', -1, 1, "
                "'warehouse:t' || (i % 1000), TIMESTAMPTZ '2026-01-01' + ((i / 1000) || ' days')::interval, "
                "TIMESTAMPTZ '2026-01-02' + ((i / 1000) || ' days')::interval, 'w', 'overwrite', 'written', "
                "md5(i::text), TIMESTAMPTZ '2026-01-01' + (i || ' minutes')::interval, '0.1.0', 1, 1, false, "
                "'2000:' || i, 2000 FROM generate_series(1, :runs) AS i"
            ),
            {"runs": runs},
        )
        conn.exec_driver_sql("ANALYZE idem_task_attempt")
        conn.exec_driver_sql("ANALYZE idem_window_write")
    store.engine.dispose()
    return time.monotonic() - started


def query_times(url: str, repeats: int) -> tuple[list[float], int]:
    from airflow_idempotent.history.report import HistoryFilter, window_history
    from airflow_idempotent.history.store import HistoryStore

    store = HistoryStore(sa.create_engine(url))
    flt = HistoryFilter(dag_id="dag_0042", limit=50)
    window_history(store, flt)  # warm
    times: list[float] = []
    found = 0
    for _ in range(repeats):
        started = time.perf_counter()
        found = len(window_history(store, flt))
        times.append((time.perf_counter() - started) * 1000)
    store.engine.dispose()
    return times, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=200)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "history.md"))
    args = parser.parse_args()

    home = str(scratch_dir("idem_bench_history_"))
    os.environ.setdefault("AIRFLOW_HOME", home)
    db = f"idem_bench_hist_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG.format(db="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{db}"')
    results: dict[str, Any] = {}
    try:
        pg_conn = json.dumps(
            {"conn_type": "postgres", "host": "127.0.0.1", "port": 5432, "login": "postgres", "schema": db}
        )
        sqlite_conn = json.dumps({"conn_type": "sqlite", "host": f"{home}/history.db"})
        for name, conn_json in (("PostgreSQL", pg_conn), ("SQLite (embedded)", sqlite_conn)):
            times = per_attempt(conn_json, args.attempts)
            results[name] = times
            print(f"{name}: per attempt median {statistics.median(times):.2f} ms", flush=True)
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{db}" WITH (FORCE)')
            conn.exec_driver_sql(f'CREATE DATABASE "{db}"')
        fill = fill_attempts(PG.format(db=db), args.rows)
        print(f"filled {args.rows:,} attempt rows in {fill:.1f} s", flush=True)
        qtimes, found = query_times(PG.format(db=db), args.repeats)
        print(f"history query: median {statistics.median(qtimes):.1f} ms ({found} windows)", flush=True)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.dispose()

    pg_version = subprocess.run(["psql", "--version"], capture_output=True, text=True).stdout.strip()
    lines = [
        "# History benchmark: cost per attempt and the history query",
        "",
        f"Generated by `python bench/bench_history.py` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        "",
        "## Added time per task attempt (in-process)",
        "",
        "The worker-side listener's running and success hooks for one attempt plus the operator's "
        "window-write record (ordinal, dataset version, non-determinism check), each a fresh run id.",
        "",
        "| history store | attempts | median (ms) | p90 (ms) | max (ms) | goal <= 10 ms |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, times in results.items():
        p90 = sorted(times)[int(len(times) * 0.9) - 1]
        med = statistics.median(times)
        verdict = "met" if med <= 10 else "NOT met"
        lines.append(f"| {name} | {len(times)} | {med:.2f} | {p90:.2f} | {max(times):.2f} | {verdict} |")
    med_q = statistics.median(qtimes)
    lines += [
        "",
        "## History query for one DAG's windows",
        "",
        f"`window_history(store, HistoryFilter(dag_id='dag_0042', limit=50))` over {args.rows:,} "
        f"attempt rows and {args.rows // 2:,} window writes (1,000 DAGs) in PostgreSQL; "
        f"{found} windows returned; "
        f"median of {len(qtimes)}.",
        "",
        "| attempt rows | median (ms) | min (ms) | max (ms) | goal <= 50 ms |",
        "|---:|---:|---:|---:|---|",
        f"| {args.rows:,} | {med_q:.1f} | {min(qtimes):.1f} | {max(qtimes):.1f} | "
        f"{'met' if med_q <= 50 else 'NOT met'} |",
        "",
        "## Machine",
        "",
        f"- {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, {pg_version}",
        f"- load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

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
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import json
import os
import platform
import re
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "write.md"
DAY = dt.date(2026, 8, 25)  # the window: [DAY, DAY + 1)
NEXT_DAY = DAY + dt.timedelta(days=1)
COLUMNS = ("sale_id", "sale_date", "amount_eur", "rate")
KEYS = ("sale_id",)
POLICY = "v1"
STRATEGIES = ("overwrite", "merge")
VERSIONED = (
    "apache-airflow",
    "apache-airflow-core",
    "apache-airflow-task-sdk",
    "apache-airflow-providers-common-sql",
    "apache-airflow-providers-postgres",
    "SQLAlchemy",
    "sqlglot",
    "psycopg2-binary",
    "psycopg",
    "pendulum",
)
PG_SETTINGS = (
    "shared_buffers",
    "work_mem",
    "maintenance_work_mem",
    "max_wal_size",
    "synchronous_commit",
    "fsync",
    "full_page_writes",
    "wal_level",
    "jit",
    "max_parallel_workers_per_gather",
    "autovacuum",
)


# ------------------------------------------------------------------------------------------- SQL
def _pyformat(sql: str) -> str:
    """`:name` (SQLAlchemy text style) -> `%(name)s` (psycopg style); PAYOUT_SQL has no `::` casts."""
    return re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", r"%(\1)s", sql)


def hand_sql() -> dict[str, str]:
    """The hand-written statements: the scenario's SELECT verbatim, bound by psycopg."""
    from airflow_idempotent.examples.payouts import PAYOUT_SQL

    select = _pyformat(PAYOUT_SQL)
    cols = ", ".join(COLUMNS)
    insert = f"INSERT INTO payouts ({cols}) {select}"
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS if c not in KEYS)
    return {
        "select": select,
        "delete": "DELETE FROM payouts WHERE sale_date >= %(window_start)s AND sale_date < %(window_end)s",
        "insert": insert,
        "upsert": f"{insert} ON CONFLICT ({', '.join(KEYS)}) DO UPDATE SET {updates}",
    }


def bind_params() -> dict[str, Any]:
    return {"window_start": DAY, "window_end": NEXT_DAY, "policy_version": POLICY}


# ----------------------------------------------------------------------------------- connections
class Pg:
    """Where the server is and which bench database we own."""

    def __init__(self, host: str, port: int, user: str, db: str) -> None:
        self.host, self.port, self.user, self.db = host, port, user, db

    def dsn(self, db: str | None = None) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.user, "dbname": db or self.db}

    def sqlalchemy_url(self) -> str:
        return f"postgresql+psycopg2://{self.user}@{self.host}:{self.port}/{self.db}"

    def airflow_conn(self) -> str:
        return json.dumps(
            {
                "conn_type": "postgres",
                "host": self.host,
                "port": self.port,
                "login": self.user,
                "schema": self.db,
            }
        )

    def connect(self, db: str | None = None, autocommit: bool = False) -> Any:
        import psycopg2

        conn = psycopg2.connect(**self.dsn(db))
        conn.autocommit = autocommit
        return conn


def engine_for(pg: Pg) -> Any:
    """The engine WarehouseHook would build for this connection (psycopg2 driver, NullPool)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    return create_engine(pg.sqlalchemy_url(), poolclass=NullPool)


def make_spec() -> Any:
    """The WriteSpec the operators build for the payouts task of 2026-08-25 (parse + lint included)."""
    import pendulum

    from airflow_idempotent.examples.payouts import PAYOUT_SQL
    from airflow_idempotent.lint import check_deterministic
    from airflow_idempotent.window import Window
    from airflow_idempotent.write_spec import WriteSpec

    start = pendulum.datetime(DAY.year, DAY.month, DAY.day, tz="UTC")
    window = Window(start, start.add(days=1), source="granularity", tz="UTC")
    return WriteSpec(
        table="payouts",
        query=check_deterministic(PAYOUT_SQL, "postgres"),
        window=window,
        partition_column="sale_date",
        params={"policy_version": POLICY},
    )


# ----------------------------------------------------------------------------------------- setup
def setup_tables(pg: Pg, n: int) -> dict[str, float]:
    """sales: one day of n rows; payouts: that window's rows (a rerun) plus n rows on each adjacent day."""
    from sqlalchemy import text

    from airflow_idempotent.examples.payouts import create_payouts, create_sales

    engine = engine_for(pg)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS payouts"))
    created = create_sales(engine, days=1, per_day=n, start=DAY)
    assert created == n, (created, n)
    create_payouts(engine)
    engine.dispose()
    sql = hand_sql()
    other_day = (
        "INSERT INTO payouts (sale_id, sale_date, amount_eur, rate) "
        "SELECT %(offset)s + i, %(day)s::date, ROUND((25 + ((i * 37) %% 900) * 0.5) * 0.60, 2), 0.60 "
        "FROM generate_series(1::bigint, %(n)s::bigint) AS t(i)"
    )
    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            # Physical order as a daily job leaves it: the day before, the window, the day after.
            cur.execute(other_day, {"offset": n, "day": DAY - dt.timedelta(days=1), "n": n})
            cur.execute(sql["insert"], bind_params())
            assert cur.rowcount == n, (cur.rowcount, n)
            cur.execute(other_day, {"offset": 2 * n, "day": NEXT_DAY, "n": n})
        conn.commit()
    finally:
        conn.close()
    timings["fill"] = time.perf_counter() - t0
    admin = pg.connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute("VACUUM (ANALYZE) sales")
            cur.execute("VACUUM (ANALYZE) payouts")
            cur.execute("CHECKPOINT")
            cur.execute("SELECT pg_total_relation_size('sales'), pg_total_relation_size('payouts')")
            sales_bytes, payouts_bytes = cur.fetchone()
    finally:
        admin.close()
    timings["sales_mb"] = sales_bytes / 2**20
    timings["payouts_mb"] = payouts_bytes / 2**20
    return timings


def reset(admin: Any) -> None:
    """Between measured runs: reclaim the dead window, refresh statistics, flush dirty pages."""
    with admin.cursor() as cur:
        cur.execute("VACUUM (ANALYZE) payouts")
        cur.execute("CHECKPOINT")


def check_table(pg: Pg, n: int) -> None:
    """The target holds exactly the scenario's window plus the two untouched days."""
    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT sale_date, COUNT(*), SUM(amount_eur) FROM payouts GROUP BY sale_date ORDER BY 1"
            )
            got = cur.fetchall()
            cur.execute(f"SELECT COUNT(*), SUM(amount_eur) FROM ({hand_sql()['select']}) p", bind_params())
            want_n, want_sum = cur.fetchone()
    finally:
        conn.close()
    days = {row[0]: (row[1], row[2]) for row in got}
    assert set(days) == {DAY - dt.timedelta(days=1), DAY, NEXT_DAY}, days
    assert days[DAY] == (want_n, want_sum) and want_n == n, (days[DAY], want_n, want_sum)
    assert days[DAY - dt.timedelta(days=1)][0] == n and days[NEXT_DAY][0] == n, days


# ------------------------------------------------------------------------- the operator's path
class Instrument:
    """Times the operator's steps without changing its code: SQLAlchemy cursor events for each
    statement, and thin wrappers (instance attributes) around DBAPI connect / commit and the adapter's
    describe() and render(). Overhead: a few microseconds per statement."""

    def __init__(self, adapter: Any) -> None:
        from sqlalchemy import event

        self.adapter = adapter
        self.steps: dict[str, float] = defaultdict(float)
        self.statements: list[tuple[str, float]] = []
        self._in_describe = False
        self._t = 0.0
        engine = adapter.engine
        dialect = engine.dialect
        dialect.connect = self._timed("connect", dialect.connect)
        dialect.do_commit = self._timed("commit", dialect.do_commit)
        adapter.render = self._timed("render (sqlglot)", adapter.render)
        describe = adapter.describe

        def timed_describe(*args: Any, **kwargs: Any) -> Any:
            self._in_describe = True
            try:
                return self._timed("describe (reflection)", describe)(*args, **kwargs)
            finally:
                self._in_describe = False

        adapter.describe = timed_describe
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.steps[name] += time.perf_counter() - t0

        return wrapper

    def _before(self, *_: Any) -> None:
        self._t = time.perf_counter()

    def _after(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        elapsed = time.perf_counter() - self._t
        label = self.classify(statement)
        self.statements.append((label, elapsed))
        if label != "reflection SQL":  # inside describe(), counted in its wall time
            self.steps[label] += elapsed

    def classify(self, statement: str) -> str:
        s = " ".join(statement.split()).lower()
        if self._in_describe:
            return "reflection SQL"
        if "pg_advisory_xact_lock" in s or "set_config('lock_timeout'" in s:
            return "lock (set_config x2 + advisory lock)"
        if s.endswith("where false limit 0"):
            return "probe (columns of the SELECT)"
        if s.startswith("delete"):
            return "DELETE window"
        if s.startswith("insert") and "on conflict" in s:
            return "INSERT .. ON CONFLICT"
        if s.startswith("insert"):
            return "INSERT .. SELECT"
        if " having " in s:
            return "key check (GROUP BY key HAVING ..)"
        if "'<null>'" in s:
            return "window checksum (hash of every row)"
        if s.startswith('select count(*) from "payouts"'):
            return "COUNT(*) of the window"
        if s.startswith("select count(*) from (select"):
            return "COUNT(*) of the SELECT"
        return "other SQL"

    def take(self, total: float) -> dict[str, float]:
        """This call's steps; 'Python and driver (rest)' is what no step accounts for."""
        steps = dict(self.steps)
        accounted = sum(v for k, v in steps.items() if k != "render (sqlglot)")
        steps["Python and driver (rest, incl. render)"] = total - accounted
        self.steps = defaultdict(float)
        self.statements = []
        return steps


def run_operator(adapter: Any, spec: Any, strategy: str, n: int, inst: Instrument | None) -> dict[str, Any]:
    from airflow_idempotent.strategies import merge, overwrite

    t0 = time.perf_counter()
    result = overwrite(adapter, spec) if strategy == "overwrite" else merge(adapter, spec, list(KEYS))
    total = time.perf_counter() - t0
    if strategy == "overwrite":
        assert (result.rows_deleted, result.rows_inserted) == (n, n), result
    else:
        assert (result.source_rows, result.rows_inserted, result.rows_updated) == (n, 0, n), result
    return {"total": total, "steps": inst.take(total) if inst else {}}


def run_hand(pg: Pg, sql: Mapping[str, str], strategy: str, n: int) -> dict[str, Any]:
    """The hand-written write: one psycopg2 connection, one transaction."""
    import psycopg2

    params = bind_params()
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    conn = psycopg2.connect(**pg.dsn())
    t1 = time.perf_counter()
    steps["connect"] = t1 - t0
    try:
        with conn.cursor() as cur:
            if strategy == "overwrite":
                cur.execute(sql["delete"], params)
                t2 = time.perf_counter()
                steps["DELETE window"] = t2 - t1
                assert cur.rowcount == n, cur.rowcount
                cur.execute(sql["insert"], params)
                t3 = time.perf_counter()
                steps["INSERT .. SELECT"] = t3 - t2
            else:
                cur.execute(sql["upsert"], params)
                t3 = time.perf_counter()
                steps["INSERT .. ON CONFLICT"] = t3 - t1
            assert cur.rowcount == n, cur.rowcount
        conn.commit()
        t4 = time.perf_counter()
        steps["commit"] = t4 - t3
    finally:
        conn.close()
    total = time.perf_counter() - t0
    steps["Python and driver (rest)"] = total - sum(steps.values())
    return {"total": total, "steps": steps}


# --------------------------------------------------------------------------------- child processes
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS: Linux `clear_refs` value 5."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


@contextmanager
def rss_meter(out: dict[str, Any], prefix: str) -> Iterator[None]:
    """Peak RSS growth during the block: VmHWM after a reset (exact), and ru_maxrss growth (lower bound:
    0 when the block's peak stays below the process's earlier peak)."""
    gc.collect()
    hwm_ok = _reset_hwm()
    rss0 = _status_kb("VmRSS")
    maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    maxrss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hwm1 = _status_kb("VmHWM")
    out[f"{prefix}_rss_before_kb"] = rss0
    out[f"{prefix}_hwm_delta_kb"] = (hwm1 - rss0) if hwm_ok and hwm1 is not None and rss0 else None
    out[f"{prefix}_maxrss_delta_kb"] = maxrss1 - maxrss0


def child_operator(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """In a fresh process: a cold call (first call of a process, as an Airflow task makes it), then a
    warm one under tracemalloc. Both are reruns of the window."""
    from airflow_idempotent.adapters import adapter_for

    pg = Pg(cfg["host"], cfg["port"], cfg["user"], cfg["db"])
    adapter = adapter_for(engine_for(pg))
    spec = make_spec()
    out: dict[str, Any] = {}
    with rss_meter(out, "cold"):
        out["cold_s"] = run_operator(adapter, spec, cfg["strategy"], cfg["n"], None)["total"]
    gc.collect()
    tracemalloc.start()
    with rss_meter(out, "warm"):
        out["warm_s"] = run_operator(adapter, spec, cfg["strategy"], cfg["n"], None)["total"]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out["tracemalloc_peak_kb"] = peak / 1024
    return out


def child_insert_rows(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """common-sql's insert_rows(replace=True) through PostgresHook, rows fetched into Python first."""
    import logging

    from airflow.providers.postgres.hooks import postgres as pg_hooks
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    logging.getLogger("airflow").setLevel(logging.WARNING)  # one INFO line per 1000 rows otherwise
    hook = PostgresHook(postgres_conn_id="bench_pg")
    out: dict[str, Any] = {"driver": "psycopg (3)" if pg_hooks.USE_PSYCOPG3 else "psycopg2"}
    t0 = time.perf_counter()
    with rss_meter(out, "fetch"):
        rows = hook.get_records(hand_sql()["select"], parameters=bind_params())
    out["fetch_s"] = time.perf_counter() - t0
    assert len(rows) == cfg["n"], len(rows)
    times = []
    for i in range(cfg["repeat"]):
        meter: dict[str, Any] = {}
        t0 = time.perf_counter()
        with rss_meter(meter, "insert"):
            hook.insert_rows(
                "payouts", rows, target_fields=list(COLUMNS), replace=True, replace_index=list(KEYS)
            )
        times.append(time.perf_counter() - t0)
        if i == 0:
            out.update(meter)
        if i + 1 < cfg["repeat"]:
            admin = Pg(cfg["host"], cfg["port"], cfg["user"], cfg["db"]).connect(autocommit=True)
            try:
                reset(admin)
            finally:
                admin.close()
    out["insert_s"] = times
    return out


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


# ------------------------------------------------------------------------------------- reporting
def machine_info(pg: Pg) -> dict[str, str]:
    info: dict[str, str] = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    info["nproc"] = str(os.cpu_count())
    with suppress(OSError, subprocess.CalledProcessError):
        info["nproc"] = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    with open("/proc/meminfo") as fh:
        kb = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    info["memory"] = f"{kb / 2**20:.1f} GiB (MemTotal {kb} kB)"
    with open("/proc/cpuinfo") as fh:
        models = {line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")}
    info["cpu"] = ", ".join(sorted(models)) or platform.processor() or "unknown"
    info["kernel"] = platform.release()
    info["python"] = f"{platform.python_version()} ({sys.executable})"
    conn = pg.connect(db="postgres")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT version()")
            info["postgresql"] = cur.fetchone()[0]
            cur.execute(
                "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
                (list(PG_SETTINGS),),
            )
            info["pg settings"] = ", ".join(f"{n}={s}" for n, s in cur.fetchall())
    finally:
        conn.close()
    versions = []
    for dist in VERSIONED:
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    info["packages"] = ", ".join(versions)
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "airflow_idempotent"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        info["airflow_idempotent"] = f"commit {head}" + (
            " + uncommitted changes in the package" if dirty else ""
        )
    except OSError:
        pass
    import hashlib

    digest = hashlib.sha256()
    write_path = (
        "strategies.py",
        "write_spec.py",
        "adapters/base.py",
        "adapters/identifiers.py",
        "adapters/postgres.py",
    )
    for rel in write_path:
        digest.update((REPO_ROOT / "airflow_idempotent" / rel).read_bytes())
    info[f"sha256 of {' + '.join(write_path)}"] = digest.hexdigest()[:16]
    info["load average at start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return info


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.0f}"


def sec(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.3f}"


def mib(kb: float | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.1f}"


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


def render_markdown(res: dict[str, Any]) -> str:
    args = res["args"]
    lines = [
        "# Write benchmark: operator path vs hand-written SQL (PostgreSQL)",
        "",
        f"Generated by `{res['command']}` on {res['machine']['date']}; total run time "
        f"{res['runtime_s'] / 60:.1f} min. Median (min) of {args['repeat']} timed runs per cell after one "
        "warm-up; the variants alternate, in an order that rotates from one repeat to the next; every "
        "run is a rerun of a window the target already holds, followed by "
        "`VACUUM (ANALYZE) payouts; CHECKPOINT`. See [bench/README.md](../README.md) for the method.",
        "",
        "## Wall time per write (seconds)",
        "",
        "| window rows | strategy | operator path | hand-written (psycopg2) | ratio of medians "
        "| ratio of mins | median of paired ratios | goal <= 1.05 | operator's extra work (ms) "
        "| (hand + extra) / hand |",
        "|---:|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for size in res["sizes"]:
        for strategy in STRATEGIES:
            cell = size["runs"][strategy]
            op, hand = cell["operator"], cell["hand"]
            r_med = med(op) / med(hand)
            r_min = min(op) / min(hand)
            paired = med([o / h for o, h in zip(op, hand, strict=True)])
            extra = med(extra_work(cell))
            lines.append(
                f"| {size['n']:,} | {strategy} | {sec(med(op))} ({sec(min(op))}) | "
                f"{sec(med(hand))} ({sec(min(hand))}) | **{r_med:.3f}** | {r_min:.3f} | {paired:.3f} | "
                f"{verdict(r_med, r_min, paired)} | {ms(extra)} | "
                f"{(med(hand) + extra) / med(hand):.3f} |"
            )
    lines += [
        "",
        "Operator path: `strategies.overwrite(adapter, spec)` / `strategies.merge(adapter, spec, "
        '["sale_id"])` with a prepared `WriteSpec` (parse + determinism lint done once, outside the timing), '
        "a `PostgresAdapter` on a psycopg2 engine with NullPool as `WarehouseHook` builds it (so each call "
        "connects, like the hand-written run). Hand-written: `psycopg2.connect()`, the statements, "
        "`commit()`, `close()`.",
        "",
        "Paired ratios: operator / hand-written within the same repeat (run back to back), which "
        "cancels slow drift in the machine's load. The goal column says 'met' or 'NOT met' only when "
        "the ratio of medians, the ratio of minimums and the median paired ratio agree; load bursts from "
        "other processes during a run only ever add time, so on a shared machine the minimums are the "
        "steadier figure.",
        "",
        "Operator's extra work: per operator run, its wall time minus its own connect, DELETE, INSERT / "
        "upsert and commit (the steps the hand-written write also does), median over the runs: the time "
        "its checks (lock, reflection, probe, key check, counts, checksum) and Python add. Measured "
        "inside the same run, it does not carry the run-to-run noise of the big statement (a few "
        "percent here), so (hand + extra) / hand is a steadier estimate of the ratio than the ratio "
        "of two noisy medians.",
        "",
        *_nochecksum_table(res),
    ]

    ir = [s for s in res["sizes"] if s.get("insert_rows")]
    if ir:
        lines += [
            "## For the record: common-sql `insert_rows(replace=True)` (rows streamed through Python)",
            "",
            "| window rows | driver | fetch into Python (s) | insert_rows (s) | vs hand-written merge "
            "| RSS growth: fetch / insert_rows (MiB) |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for size in ir:
            d = size["insert_rows"]
            t = d["insert_s"]
            hand = med(size["runs"]["merge"]["hand"])
            shown = f"{sec(med(t))}" + (f" ({sec(min(t))}, n={len(t)})" if len(t) > 1 else " (1 run)")
            lines.append(
                f"| {size['n']:,} | {d['driver']} | {sec(d['fetch_s'])} | {shown} | "
                f"{med(t) / hand:.1f}x | {mib(d['fetch_hwm_delta_kb'])} / {mib(d['insert_hwm_delta_kb'])} |"
            )
        lines += [
            "",
            "`PostgresHook(...).insert_rows('payouts', rows, target_fields=[...], replace=True, "
            "replace_index=['sale_id'])` with its defaults (commit_every=1000: one transaction per 1000 "
            "rows, so NOT atomic), the rows having been fetched with `get_records` of the same SELECT "
            "(not timed). It is an upsert, so it is compared with the hand-written merge.",
            "",
        ]

    lines += [
        "## Peak memory of the operator's path (fresh process per strategy and size)",
        "",
        "| window rows | strategy | RSS growth, cold call (MiB) | RSS growth, warm call (MiB) "
        "| tracemalloc peak, warm call (KiB) | cold call (s) | warm call (s) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for size in res["sizes"]:
        for strategy in STRATEGIES:
            m = size.get("memory", {}).get(strategy)
            if not m:
                continue
            lines.append(
                f"| {size['n']:,} | {strategy} | {mib(m['cold_hwm_delta_kb'])} | "
                f"{mib(m['warm_hwm_delta_kb'])} | "
                f"{m['tracemalloc_peak_kb']:,.0f} | {sec(m['cold_s'])} | {sec(m['warm_s'])} |"
            )
    lines += [
        "",
        "RSS growth = kernel peak RSS (VmHWM, reset through `/proc/self/clear_refs` just before the call) "
        "minus RSS just before the call. The cold call is the first of its process (SQLAlchemy dialect "
        "initialisation, first-use caches), as an Airflow task makes it; the warm call runs under "
        "tracemalloc, whose peak counts Python allocations made during the call only; their times are "
        "informative only (not behind the quiet gate). "
        "`ru_maxrss` growth over the same calls (a lower bound) is in the raw data below.",
        "",
        "## Where the time goes (median per step, milliseconds)",
        "",
    ]
    for size in res["sizes"]:
        for strategy in STRATEGIES:
            cell = size["runs"][strategy]
            op_steps = _median_steps(cell["operator_steps"])
            hand_steps = _median_steps(cell["hand_steps"])
            lines += [
                f"**{strategy}, {size['n']:,} rows** (operator median total {ms(med(cell['operator']))} ms, "
                f"hand-written {ms(med(cell['hand']))} ms)",
                "",
                "| step | operator path | hand-written |",
                "|---|---:|---:|",
            ]
            names = list(dict.fromkeys([*op_steps, *hand_steps]))
            names.sort(key=_step_order)
            for name in names:
                lines.append(f"| {name} | {ms(op_steps.get(name))} | {ms(hand_steps.get(name))} |")
            lines.append("")
    lines += [
        "Operator steps are timed without changing its code: SQLAlchemy `before/after_cursor_execute` events "
        "per statement, and wrappers around DBAPI `connect`, `commit`, `adapter.describe` (reflection: its "
        "SQL and Python) and `adapter.render` (sqlglot; a part of the rest). The rest is the call's wall "
        "time that no step accounts for. Medians are per step, so they need not add up to the total.",
        "",
        f"Not in the timed operator path: parsing + determinism lint of the SQL (`check_deterministic`), "
        f"which `WindowWriteOperator.execute` does once per task: median {res['lint_ms']:.1f} ms.",
        "",
        "## Setup",
        "",
        "| window rows | sales (MiB) | payouts (MiB) | fill + VACUUM (s) | operator result check |",
        "|---:|---:|---:|---:|---|",
    ]
    for size in res["sizes"]:
        st = size["setup"]
        lines.append(
            f"| {size['n']:,} | {st['sales_mb']:.0f} | {st['payouts_mb']:.0f} | {st['fill']:.1f} | "
            "window = scenario's rows, adjacent days untouched |"
        )
    lines += [
        "",
        "`sales`: one day (2026-08-25) of N rows from the scenario's generator (`create_sales(days=1, "
        "per_day=N)`, set-based). `payouts` (`create_payouts()`: sale_id BIGINT PRIMARY KEY, sale_date DATE, "
        "amount_eur DECIMAL(12,2), rate DECIMAL(4,2), index on sale_date): N rows on 2026-08-24, the "
        "window's N rows (the job's v1 output, so every measured write is a rerun), N rows on 2026-08-26. "
        "Policy v1, so a rerun rewrites identical values.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
    ]
    for key, value in res["machine"].items():
        lines.append(f"| {key} | {value} |")
    g = res.get("gate")
    if g and g["limit"] > 0:
        others = [
            x for size in res["sizes"] for s in STRATEGIES for x in size["runs"][s].get("others_cpu", [])
        ]
        lines.append(
            f"| quiet gate | each timed run started once other processes used <= {g['limit']} CPU over "
            f"{g['sample']} s (max {g['max_wait']:g} s per run, {g['budget']:g} s in all): waited "
            f"{g['waited_s']:.0f} s in all; {g['gave_up']} of {g['runs']} runs started without quiet; "
            f"CPUs used by others just before the runs: median {med(others):.2f}, max {max(others):.2f} |"
        )
    loads = [x for size in res["sizes"] for s in STRATEGIES for x in size["runs"][s].get("load1", [])]
    if loads:
        lines.append(f"| 1-min load average during the timed runs | {min(loads):.2f} to {max(loads):.2f} |")
    lines.append(f"| load average at end | {res['load_end']} |")
    lines += [
        "",
        "<details><summary>Raw timings (seconds, in run order)</summary>",
        "",
        "```json",
        json.dumps(_raw(res), indent=1),
        "```",
        "",
        "</details>",
        "",
    ]
    return "\n".join(lines)


GOAL = 1.05


def verdict(*ratios: float) -> str:
    """'met' / 'NOT met' only when every estimate agrees; a split verdict is noise, and says so."""
    if all(r <= GOAL for r in ratios):
        return "met"
    if all(r > GOAL for r in ratios):
        return "NOT met"
    return "unclear (estimates disagree)"


def _nochecksum_table(res: Mapping[str, Any]) -> list[str]:
    if not any(size["runs"][s].get("operator_nochecksum") for size in res["sizes"] for s in STRATEGIES):
        return []
    lines = [
        "The operators compute a result checksum of the window before commit by default (`checksum=True`, "
        "for the history store). The same path with `checksum=False`, timed in the same rotation:",
        "",
        "| window rows | strategy | operator, checksum=False | ratio of medians | ratio of mins "
        "| median of paired ratios | goal <= 1.05 | extra work (ms) | (hand + extra) / hand "
        "| checksum step, default path (ms) |",
        "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for size in res["sizes"]:
        for strategy in STRATEGIES:
            cell = size["runs"][strategy]
            op, hand = cell.get("operator_nochecksum"), cell["hand"]
            if not op:
                continue
            extra = med(extra_work(cell, "operator_nochecksum"))
            r_med, r_min = med(op) / med(hand), min(op) / min(hand)
            paired = med([o / h for o, h in zip(op, hand, strict=True)])
            ck = _median_steps(cell["operator_steps"]).get("window checksum (hash of every row)")
            lines.append(
                f"| {size['n']:,} | {strategy} | {sec(med(op))} ({sec(min(op))}) | "
                f"**{r_med:.3f}** | {r_min:.3f} | {paired:.3f} | {verdict(r_med, r_min, paired)} | "
                f"{ms(extra)} | "
                f"{(med(hand) + extra) / med(hand):.3f} | {ms(ck)} |"
            )
    lines.append("")
    return lines


_ORDER = [
    "connect",
    "lock (set_config x2 + advisory lock)",
    "describe (reflection)",
    "probe (columns of the SELECT)",
    "key check (GROUP BY key HAVING ..)",
    "COUNT(*) of the SELECT",
    "DELETE window",
    "COUNT(*) of the window",
    "INSERT .. SELECT",
    "INSERT .. ON CONFLICT",
    "window checksum (hash of every row)",
    "other SQL",
    "commit",
    "render (sqlglot)",
    "Python and driver (rest, incl. render)",
    "Python and driver (rest)",
]


SHARED_STEPS = frozenset({"connect", "DELETE window", "INSERT .. SELECT", "INSERT .. ON CONFLICT", "commit"})


def extra_work(cell: Mapping[str, Any], side: str = "operator") -> list[float]:
    """Per operator run: wall time minus the steps the hand-written write also does."""
    return [
        total - sum(v for k, v in steps.items() if k in SHARED_STEPS)
        for total, steps in zip(cell[side], cell[f"{side}_steps"], strict=True)
    ]


def _step_order(name: str) -> int:
    return _ORDER.index(name) if name in _ORDER else len(_ORDER)


def _median_steps(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    names = {k for r in runs for k in r}
    return {k: med([r.get(k, 0.0) for r in runs]) for k in names}


def _raw(res: Mapping[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for size in res["sizes"]:
        entry: dict[str, Any] = {}
        for strategy in STRATEGIES:
            cell = size["runs"][strategy]
            entry[strategy] = {
                "warmup": {k: round(v, 4) for k, v in cell["warmup"].items()},
                "load_avg_1min_after_each_repeat": [round(x, 2) for x in cell.get("load1", [])],
                "others_cpu_before_each_run": [round(x, 2) for x in cell.get("others_cpu", [])],
            }
            for side in ("operator", "hand", "operator_nochecksum"):
                if side in cell:
                    entry[strategy][side] = [round(x, 4) for x in cell[side]]
                    entry[strategy][f"{side}_steps_ms"] = [
                        {k: round(v * 1000, 1) for k, v in steps.items()} for steps in cell[f"{side}_steps"]
                    ]
        entry["memory"] = size.get("memory", {})
        if size.get("insert_rows"):
            entry["insert_rows"] = size["insert_rows"]
        raw[str(size["n"])] = entry
    return raw


# ------------------------------------------------------------------------------------------ quiet gate
def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def other_cpu(seconds: float) -> float:
    """CPUs kept busy by everything else during `seconds` while this benchmark is idle (0 .. nproc)."""
    busy0, total0 = _cpu_jiffies()
    time.sleep(seconds)
    busy1, total1 = _cpu_jiffies()
    return (busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1)


class QuietGate:
    """Start a timed run only when the rest of the machine is quiet: sample the CPU use of other
    processes for a moment while the benchmark is idle, and wait while it is above `limit` CPUs.
    Waits are bounded per run and in total, so a busy machine slows the benchmark, never stalls it."""

    def __init__(self, limit: float, sample: float, max_wait: float, budget: float) -> None:
        self.limit, self.sample, self.max_wait, self.budget = limit, sample, max_wait, budget
        self.waited = 0.0
        self.gave_up = 0
        self.samples: list[float] = []

    def wait(self) -> float:
        """Block until quiet (or out of patience); return the last sample (CPUs used by others)."""
        if self.limit <= 0:
            return float("nan")
        start = time.perf_counter()
        while True:
            used = other_cpu(self.sample)
            waited = time.perf_counter() - start
            if used <= self.limit:
                break
            if waited >= self.max_wait or self.waited + waited >= self.budget:
                self.gave_up += 1
                break
        self.waited += max(0.0, time.perf_counter() - start - self.sample)
        self.samples.append(used)
        return used


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

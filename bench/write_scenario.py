"""The scenario of `bench_write.py` on PostgreSQL, and its hand-written baseline.

The payouts window (2026-08-25 under policy v1) in the bench's own database: the statements a person
would write for it (bound by psycopg), the connection details, the `WriteSpec` the operators build,
the tables filled and checked around each measured write, the hand-written write itself, and the
record of the machine and server a run measured. `bench_peers.py` and `peer_tools.py` rerun the same
scenario through this module.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from contextlib import suppress
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
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


# ---------------------------------------------------------------------------------- hand-written
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


# -------------------------------------------------------------------------------- machine record
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

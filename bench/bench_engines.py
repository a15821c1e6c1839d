#!/usr/bin/env python
"""Write benchmark per database: the operators (checksum and history on) against the hand-written SQL.

Run on demand (not a test), from the repository root with the project's venv::

    python bench/bench_engines.py --engines postgres,mariadb,duckdb --sizes 100000,1000000

For each engine and window size N, in throw-away databases it creates and drops (the history store
in a PostgreSQL database of its own):

1. PartitionOverwriteOperator / MergeOperator ``.execute(context)`` exactly as a task runs them
   (lint, fingerprint, lock, reflection, checksum, history record), ``delete_missing=False``;
2. the hand-written write on one connection, one transaction: ``DELETE`` + ``INSERT .. SELECT`` for
   overwrite, the native upsert (``ON CONFLICT DO UPDATE`` / ``ON DUPLICATE KEY UPDATE``) for merge;
3. on PostgreSQL, the guarded write (stage -> diff by key -> swap, ``guard.write.guarded_write``)
   against the plain overwrite ``strategies.overwrite`` of the same spec.

The variants alternate within each repeat, in an order that rotates from one repeat to the next;
every run is a rerun of a window the target already holds, preceded on PostgreSQL by
``VACUUM (ANALYZE); CHECKPOINT``. Medians, minimum-maximum and the median of paired ratios are reported,
with the operator's own statements timed one by one (the rest is Python: reflection, sqlglot,
fingerprint, history). Results: bench/results/write-engines.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import secrets
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from engines_report import added, main_statement, other, server_cpu, spread, summary, write
from scratch import scratch_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

OUTPUT = Path(__file__).resolve().parent / "results" / "write-engines.md"
DAY = dt.date(2026, 8, 25)
COLUMNS = ("sale_id", "sale_date", "amount_eur", "rate")
PG = "postgres@127.0.0.1:5432"
MARIADB = "root@127.0.0.1:3306"


# ------------------------------------------------------------------------------------- databases
class Database:
    """One engine's throw-away database: its URL, Airflow connection and hand-written statements."""

    def __init__(self, kind: str, workdir: Path, prefix: str = "idem_bench") -> None:
        self.kind = kind
        self.name = f"{prefix}_{secrets.token_hex(4)}"
        if kind == "duckdb":
            self.path = workdir / f"{self.name}.duckdb"
            self.url = f"duckdb:///{self.path}"
            self.conn = {"conn_type": "duckdb", "host": str(self.path)}
        elif kind == "postgres":
            self.url = f"postgresql+psycopg2://{PG}/{self.name}"
            self.conn = {"conn_type": "postgres", "host": "127.0.0.1", "port": 5432, "login": "postgres"}
            self.conn["schema"] = self.name
        else:
            self.url = f"mysql+pymysql://{MARIADB}/{self.name}"
            self.conn = {"conn_type": "mysql", "host": "127.0.0.1", "port": 3306, "login": "root"}
            self.conn["schema"] = self.name

    def admin(self, postgres_sql: str, mariadb_sql: str) -> None:
        """Run one server-level statement (CREATE / DROP DATABASE) outside any transaction."""
        import sqlalchemy as sa

        if self.kind == "duckdb":
            return
        url = (
            f"postgresql+psycopg2://{PG}/postgres"
            if self.kind == "postgres"
            else f"mysql+pymysql://{MARIADB}/"
        )
        engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as c:
            c.execute(sa.text(postgres_sql if self.kind == "postgres" else mariadb_sql))
        engine.dispose()

    def create(self) -> None:
        self.admin(f'CREATE DATABASE "{self.name}"', f"CREATE DATABASE `{self.name}`")

    def drop(self) -> None:
        self.admin(
            f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)', f"DROP DATABASE IF EXISTS `{self.name}`"
        )
        if self.kind == "duckdb":
            self.path.unlink(missing_ok=True)

    def statements(self) -> dict[str, str]:
        """The hand-written write: the scenario's SELECT verbatim under DELETE + INSERT, or the upsert."""
        from airflow_idempotent.examples.payouts import PAYOUT_SQL

        cols = ", ".join(COLUMNS)
        insert = f"INSERT INTO payouts ({cols}) {PAYOUT_SQL}"
        rest = [c for c in COLUMNS if c != "sale_id"]
        if self.kind == "mariadb":
            upsert = f"{insert} ON DUPLICATE KEY UPDATE " + ", ".join(f"{c} = VALUES({c})" for c in rest)
        else:
            upsert = f"{insert} ON CONFLICT (sale_id) DO UPDATE SET " + ", ".join(
                f"{c} = EXCLUDED.{c}" for c in rest
            )
        return {
            "delete": "DELETE FROM payouts WHERE sale_date >= :window_start AND sale_date < :window_end",
            "insert": insert,
            "upsert": upsert,
        }


def params() -> dict[str, Any]:
    return {"window_start": DAY, "window_end": DAY + dt.timedelta(days=1), "policy_version": "v1"}


def engine_of(db: Database) -> Any:
    """The hand-written write's engine, made as the provider makes its own (adapters.drivers), so
    the two differ by their statements, not by a driver's per-connect costs (PyMySQL's TLS context)."""
    from sqlalchemy.pool import NullPool

    from airflow_idempotent.adapters.drivers import create_engine

    return create_engine(db.url, poolclass=NullPool)


def fill(db: Database, n: int) -> None:
    """sales: one day of n rows; payouts: that day's window already written (every run is a rerun)."""
    import sqlalchemy as sa

    from airflow_idempotent.examples.payouts import create_payouts, create_sales

    engine = engine_of(db)
    with engine.begin() as c:
        c.execute(sa.text("DROP TABLE IF EXISTS payouts"))
    assert create_sales(engine, days=1, per_day=n, start=DAY) == n
    create_payouts(engine)
    with engine.begin() as c:
        c.execute(sa.text(db.statements()["insert"]), params())
    engine.dispose()
    settle(db)


def settle(db: Database) -> None:
    """Between runs: reclaim the rewritten window and flush, so each run starts from the same state."""
    import sqlalchemy as sa

    engine = engine_of(db)
    if db.kind == "postgres":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(sa.text("VACUUM (ANALYZE) payouts"))
            c.execute(sa.text("CHECKPOINT"))
    elif db.kind == "duckdb":
        with engine.begin() as c:
            c.execute(sa.text("CHECKPOINT"))
    engine.dispose()


# ------------------------------------------------------------------------------------- the writes
def cpu_reader(kind: str, dbapi: Any) -> Callable[[], float]:
    """Seconds of CPU the database spent for this connection so far: the server process
    (PostgreSQL) or thread (MariaDB) serving it, read from /proc (both run on this machine), or
    this process's own CPU for embedded DuckDB (Python waits inside the statement). Unlike wall
    time, it does not stretch when other work on the machine takes the CPUs, so it compares one
    statement with another under load; it leaves out I/O waits (the commit's flush)."""
    if kind == "duckdb":
        return time.process_time
    if kind == "postgres":
        task = dbapi.get_backend_pid()
    else:  # the server thread of this connection; looked up on a connection of its own
        import pymysql

        admin = pymysql.connect(host="127.0.0.1", port=3306, user="root")
        try:
            with admin.cursor() as cur:
                cur.execute(
                    "SELECT TID FROM information_schema.PROCESSLIST WHERE ID = %s", (dbapi.thread_id(),)
                )
                task = cur.fetchone()[0]
        finally:
            admin.close()
    path = Path(f"/proc/{task}/schedstat")
    return lambda: int(path.read_text().split()[0]) / 1e9


@contextmanager
def timed_statements(kind: str = "", cpu: dict[str, float] | None = None) -> Iterator[dict[str, float]]:
    """Time every statement the adapter runs, by kind (what the hand-written write does too, or not).

    The statement's text is read from SQLAlchemy's cursor event, not rendered again here, so the
    timing adds no sqlglot work of its own to the operator's 'other'. The commit of the connection
    those statements ran on is a step too (the hand-written write commits the same work; on DuckDB
    it is where a large write's checkpoint happens), so 'other' is the operator's own fixed cost.
    With `kind` and `cpu`, each statement's server CPU (`cpu_reader`) is added to `cpu` by kind,
    and the time spent finding the server's thread to `steps["bench"]` (not the operator's).
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine
    from sqlalchemy.engine.default import DefaultDialect

    from airflow_idempotent.adapters.base import EngineAdapter

    real = EngineAdapter.execute
    real_commit = DefaultDialect.do_commit
    steps: dict[str, float] = defaultdict(float)
    last: list[str] = [""]
    writers: set[int] = set()  # the pooled connections the adapter's statements ran on
    readers: dict[int, Callable[[], float]] = {}

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        last[0] = statement

    def execute(self: Any, conn: Any, expression: Any, binds: Any) -> Any:
        writers.add(id(conn.connection))  # what SQLAlchemy hands do_commit
        dbapi = conn.connection.dbapi_connection
        read: Callable[[], float] | None = None
        if cpu is not None:
            if id(dbapi) not in readers:
                t = time.perf_counter()
                readers[id(dbapi)] = cpu_reader(kind, dbapi)
                steps["bench"] += time.perf_counter() - t
            read = readers[id(dbapi)]
        c0 = read() if read is not None else 0.0
        t0 = time.perf_counter()
        try:
            return real(self, conn, expression, binds)
        finally:
            steps[kind_of(last[0])] += time.perf_counter() - t0
            if read is not None and cpu is not None:
                cpu[kind_of(last[0])] += read() - c0

    def do_commit(self: Any, dbapi_connection: Any) -> None:
        t0 = time.perf_counter()
        try:
            real_commit(self, dbapi_connection)
        finally:
            if id(dbapi_connection) in writers:
                steps["commit"] += time.perf_counter() - t0

    event.listen(Engine, "before_cursor_execute", seen)
    EngineAdapter.execute = execute  # type: ignore[method-assign]
    DefaultDialect.do_commit = do_commit  # type: ignore[method-assign]
    try:
        yield steps
    finally:
        EngineAdapter.execute = real  # type: ignore[method-assign]
        DefaultDialect.do_commit = real_commit  # type: ignore[method-assign]
        event.remove(Engine, "before_cursor_execute", seen)


def kind_of(sql: str) -> str:
    head = sql.lstrip().upper()
    if head.startswith("DELETE"):
        return "delete"
    if head.startswith("INSERT"):
        return "upsert" if " ON CONFLICT" in head or "ON DUPLICATE KEY" in head else "insert"
    if "WHERE FALSE" in head or "LIMIT 0" in head:
        return "probe"
    if "HASH" in head or "CRC32" in head:
        return "checksum"
    if "GROUP BY" in head:
        return "key check"
    if "COUNT(DISTINCT" in head:
        return "counts + keys"
    if "_IDEM_SRC" in head:  # the merge's pass over its source: rows and the window, no keys
        return "source pass"
    return "counts"


def run_hand(
    db: Database, strategy: str, steps_out: list[dict[str, float]], cpu_out: list[dict[str, float]]
) -> float:
    """The hand-written write on one connection, one transaction; its statements and commit timed,
    and each statement's server CPU (`cpu_reader`, found outside the timed span)."""
    import sqlalchemy as sa

    sql = db.statements()
    engine = engine_of(db)
    names = ("delete", "insert") if strategy == "overwrite" else ("upsert",)
    steps: dict[str, float] = {}
    cpu: dict[str, float] = {}
    t0 = time.perf_counter()
    with engine.connect() as c:
        t = time.perf_counter()
        read = cpu_reader(db.kind, c.connection.dbapi_connection)
        bench = time.perf_counter() - t
        transaction = c.begin()
        for name in names:
            t, c0 = time.perf_counter(), read()
            c.execute(sa.text(sql[name]), params())
            steps[name] = time.perf_counter() - t
            cpu[name] = read() - c0
        t = time.perf_counter()
        transaction.commit()
        steps["commit"] = time.perf_counter() - t
    took = time.perf_counter() - t0 - bench
    engine.dispose()
    steps_out.append(steps)
    cpu_out.append(cpu)
    return took


def run_operator(
    kind: str, strategy: str, run: int, steps_out: list[dict[str, float]], cpu_out: list[dict[str, float]]
) -> float:
    """The operator's whole execute() on the Airflow connection `warehouse` (an engine of `kind`), its
    statements timed and each one's server CPU; the wall time without the timing's own cost."""
    import pendulum

    from airflow_idempotent.examples.payouts import PAYOUT_SQL
    from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator

    common: dict[str, Any] = {
        "task_id": f"write_{strategy}",
        "conn_id": "warehouse",
        "table": "payouts",
        "partition_column": "sale_date",
        "sql": PAYOUT_SQL,
        "parameters": {"policy_version": "v1"},
        "granularity": "day",
    }
    op: Any = (
        MergeOperator(key_columns=["sale_id"], **common)
        if strategy == "merge"
        else PartitionOverwriteOperator(**common)
    )
    at = pendulum.datetime(DAY.year, DAY.month, DAY.day, tz="UTC")

    class DagRun:
        run_type = "manual"
        conf: ClassVar[dict[str, Any]] = {}

    context = {
        "logical_date": at,
        "data_interval_start": at,
        "data_interval_end": at,
        # a run of its own per call, as each scheduled task is: the run ids repeated across engines
        # and sizes made later cells redeliveries (fence raised by UPDATE, no record INSERT)
        "run_id": f"bench_{run}_{secrets.token_hex(4)}",
        "dag_run": DagRun(),
    }
    cpu: dict[str, float] = defaultdict(float)
    with timed_statements(kind, cpu) as steps:
        t0 = time.perf_counter()
        out = op.execute(context)
        took = time.perf_counter() - t0 - steps.pop("bench", 0.0)
    assert out.get("checksum") and out.get("ordinal"), out  # checksum and history were on
    steps_out.append(dict(steps))
    cpu_out.append(dict(cpu))
    return took


def guarded_spec(db: Database) -> Any:
    import pendulum

    from airflow_idempotent.examples.payouts import PAYOUT_SQL
    from airflow_idempotent.lint import check_deterministic
    from airflow_idempotent.window import Window
    from airflow_idempotent.write_spec import WriteSpec

    dialect = {"postgres": "postgres", "mariadb": "mysql", "duckdb": "duckdb"}[db.kind]
    start = pendulum.datetime(DAY.year, DAY.month, DAY.day, tz="UTC")
    return WriteSpec(
        table="payouts",
        query=check_deterministic(PAYOUT_SQL, dialect),
        window=Window(start, start.add(days=1), source="granularity", tz="UTC"),
        partition_column="sale_date",
        params={"policy_version": "v1"},
    )


def run_guarded(db: Database, guarded: bool) -> float:
    from airflow_idempotent.adapters import adapter_for
    from airflow_idempotent.guard.config import Thresholds
    from airflow_idempotent.guard.write import guarded_write
    from airflow_idempotent.strategies import overwrite

    adapter = adapter_for(engine_of(db))
    spec = guarded_spec(db)
    t0 = time.perf_counter()
    if guarded:
        guarded_write(adapter, spec, ["sale_id"], ["amount_eur"], Thresholds(), "swap")
    else:
        overwrite(adapter, spec)
    took = time.perf_counter() - t0
    adapter.engine.dispose()
    return took


# ------------------------------------------------------------------------------------- the runs
def alternate(
    variants: Mapping[str, Callable[[int], float]], repeats: int, db: Database
) -> dict[str, list[float]]:
    """Each repeat runs every variant once, the order rotating; one warm-up round first."""
    names = list(variants)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats + 1):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            settle(db)
            took = variants[name](r)
            if r:
                times[name].append(took)
    return times


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def cpu_ticks() -> tuple[int, int]:
    """(all, steal) CPU ticks since boot: steal is time the hypervisor gave this VM's CPUs to others."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields[:8]), fields[7]


@contextmanager
def connection(conn_id: str, kind: str, home: Path, prefix: str = "idem_bench") -> Iterator[Database]:
    """A throw-away database of `kind`, the Airflow connection `conn_id` while the block runs."""
    db = Database(kind, home, prefix)
    db.create()
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(db.conn)
    try:
        yield db
    finally:
        db.drop()


@contextmanager
def airflow_home(prefix: str = "idem_bench") -> Iterator[Path]:
    """A throw-away Airflow home (SQLite metadata) and a history store in a PostgreSQL database of
    its own, named by the environment as a task finds them; both removed at the end."""
    home = scratch_dir(f"{prefix}_home_")
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        }
    )
    import airflow  # noqa: F401  (before the package, as a task imports them)

    with connection("idempotent_history", "postgres", home, prefix):
        yield home


def warehouse(
    kind: str, home: Path, prefix: str = "idem_bench"
) -> contextlib.AbstractContextManager[Database]:
    """An engine's throw-away database, the Airflow connection `warehouse` while the block runs."""
    return connection("warehouse", kind, home, prefix)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="postgres,mariadb,duckdb")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    started = time.perf_counter()
    ticks = cpu_ticks()
    rows: list[str] = []
    loads: list[str] = [f"start {load()}"]
    with airflow_home() as home:
        for kind in args.engines.split(","):
            with warehouse(kind, home) as db:
                for n in [int(s) for s in args.sizes.split(",")]:
                    fill(db, n)
                    for strategy in ("overwrite", "merge"):
                        steps: list[dict[str, float]] = []
                        hand_steps: list[dict[str, float]] = []
                        cpu: list[dict[str, float]] = []
                        hand_cpu: list[dict[str, float]] = []
                        times = alternate(
                            {
                                "operator": lambda r, s=strategy, d=db, st=steps, c=cpu: run_operator(
                                    d.kind, s, r, st, c
                                ),
                                "hand": lambda r, s=strategy, d=db, st=hand_steps, c=hand_cpu: run_hand(
                                    d, s, st, c
                                ),
                            },
                            args.repeats,
                            db,
                        )
                        s = summary(times["operator"], times["hand"])
                        measured = steps[1:]  # the warm-up's steps left out
                        keys = sorted({k for st in measured for k in st})
                        med = {k: statistics.median(st.get(k, 0.0) for st in measured) for k in keys}
                        python = other(times["operator"], measured)
                        hand_other = other(times["hand"], hand_steps[1:])
                        step_text = ", ".join(f"{k} {v * 1000:.0f}" for k, v in med.items())
                        extra = added(times["operator"], measured) - hand_other
                        rows.append(
                            f"| {kind} | {n:,} | {strategy} | {spread(s, 'a')} | "
                            f"{spread(s, 'b')} | **{s['ratio_med']:.3f}** | "
                            f"{s['ratio_min']:.3f} | {s['paired']:.3f} | "
                            f"**{(s['b_med'] + extra) / s['b_med']:.3f}** ({extra * 1000:.0f} ms) | "
                            f"{s['extra_ms']:.0f} | {step_text}; other {python * 1000:.0f} | "
                            f"{(python - hand_other) * 1000:.0f} | "
                            f"{main_statement(measured, hand_steps[1:])} | "
                            f"{server_cpu(cpu[1:], hand_cpu[1:])} |"
                        )
                        print(rows[-1], flush=True)
                        loads.append(f"{kind} {n} {strategy}: {load()}")
                    if kind == "postgres" and n == max(int(s) for s in args.sizes.split(",")):
                        times = alternate(
                            {
                                "guarded": lambda r, d=db: run_guarded(d, True),
                                "plain": lambda r, d=db: run_guarded(d, False),
                            },
                            args.repeats,
                            db,
                        )
                        s = summary(times["guarded"], times["plain"])
                        rows.append(
                            f"| {kind} | {n:,} | guarded swap vs plain overwrite | {spread(s, 'a')} | "
                            f"{spread(s, 'b')} | "
                            f"**{s['ratio_med']:.3f}** | {s['ratio_min']:.3f} | {s['paired']:.3f} | | "
                            f"{s['extra_ms']:.0f} | | | | |"
                        )
                        print(rows[-1], flush=True)
    loads.append(f"end {load()}")
    total, steal = (now - then for now, then in zip(cpu_ticks(), ticks, strict=True))
    write(args, rows, loads, time.perf_counter() - started, 100 * steal / max(total, 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

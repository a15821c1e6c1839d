"""Faults: what breaks around a write, on purpose, and what the write does about it, measured.

- Connection dropped mid-transaction (PostgreSQL pg_terminate_backend, MariaDB KILL CONNECTION,
  from another session while the INSERT is at sale_id N): the attempt fails, nothing of it is
  committed, the rerun gives the clean result.
- History store down (a closed port; and a port that accepts and never answers): the write
  still happens, its record is spooled and delivered by the next write; a guarded backfill
  refuses to write blind (fail closed).
- A zombie attempt beside its retry (two processes on one window; the first slowed inside its
  INSERT): the retry waits for the window's lock, both complete, the table is the clean run's,
  history has both writes. The retry's lock wait is measured.
- Database restarted during a backfill: a private PostgreSQL (initdb / pg_ctl on a free port, in
  a temporary directory: the shared server is never touched), restarted with `pg_ctl restart -m
  immediate` while a window's INSERT is running; windows are retried as Airflow would; every
  window must end right, history complete (records spooled while it was down are delivered).
- Scheduler restarted during a guarded backfill (e2e): the reliability cluster's scheduler and
  its LocalExecutor workers are killed with SIGKILL mid-backfill and started again.

Every case is one line in the reliability results (tests/reliability/conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from airflow_idempotent.examples.payouts import (
    create_payouts,
    create_sales,
    simulate_crash,
    table_checksum,
    window_totals,
)
from airflow_idempotent.guard import GuardRefusal
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.history.spool import Spool
from airflow_idempotent.testing import compare_tables
from airflow_idempotent.testing.tables import read_table
from tests.reliability import probe
from tests.reliability.conftest import Recorder
from tests.reliability.test_crash_matrix import DAY, FIRST_SALE, LAST_SALE, damaged_start, make_task, reset
from tests.test_operators import day_truth

STRATEGIES = ("overwrite", "merge", "guarded_swap")
SERVERS = ("postgres", "mariadb")


def ctx(
    day: date, run_id: str, try_number: int, run_type: str = "manual", conf: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A task's context as Airflow hands it in (task instance, DAG run, logical date)."""
    at = pendulum.datetime(day.year, day.month, day.day, tz="UTC")
    ti = SimpleNamespace(
        dag_id="reliability", run_id=run_id, task_id="write", map_index=-1, try_number=try_number
    )
    dag_run = SimpleNamespace(run_type=run_type, conf=conf or {}, run_id=run_id)
    return {
        "ti": ti,
        "dag_run": dag_run,
        "run_id": run_id,
        "logical_date": at,
        "data_interval_start": at,
        "data_interval_end": at,
    }


def history_at(path: Path, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    store = HistoryStore(sa.create_engine(sa.URL.create("sqlite", database=str(path)), poolclass=NullPool))
    store.migrate()
    return store


def expected_table(engine: sa.Engine, strategy: str) -> Any:
    """The clean run from the damaged state: the figure every fault is compared with."""
    reset(engine)
    make_task(strategy).execute(ctx(DAY, "clean", 1))  # type: ignore[arg-type]
    engine.dispose()
    clean = read_table(engine, "payouts")
    reset(engine)
    return clean


def lost_and_duplicated(engine: sa.Engine, clean: Any) -> dict[str, int]:
    diff = compare_tables(clean, read_table(engine, "payouts"), ("sale_id",))
    return {
        "rows_lost": sum(n for _, n in diff.missing),
        "duplicates": sum(a - e for _, a, e in diff.duplicated),
        "extra_rows": sum(n for _, n in diff.extra),
        "drifted_rows": len(diff.drifted),
    }


# --------------------------------------------------------------------------------------------
# Connection dropped mid-transaction
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("warehouse", SERVERS, indirect=True)
def test_connection_dropped_mid_transaction(
    warehouse: Any,
    strategy: str,
    reliability: Recorder,
    reliability_seed: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    damaged_start(warehouse.engine)
    store = history_at(tmp_path / "history.db", monkeypatch)
    clean = expected_table(warehouse.engine, strategy)
    before = table_checksum(warehouse.engine, "payouts")
    row = FIRST_SALE + reliability_seed % (LAST_SALE - FIRST_SALE)
    sessions: list[int] = []
    admin = sa.create_engine(warehouse.url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    dropped_at: list[float] = []

    def drop() -> None:
        with admin.connect() as conn:
            probe.kill_session(conn, warehouse.engine.dialect.name, sessions[-1])
        dropped_at.append(time.monotonic())

    restore = probe.arm_inserts(row, 30.0, drop, on_session=sessions.append)
    started = time.monotonic()
    error: BaseException | None = None
    try:
        make_task(strategy).execute(ctx(DAY, "dropped", 1))  # type: ignore[arg-type]
    except Exception as err:
        error = err
    finally:
        restore()
        admin.dispose()
    failed_after = time.monotonic() - started
    warehouse.engine.dispose()
    unchanged = table_checksum(warehouse.engine, "payouts") == before
    rerun_started = time.monotonic()
    make_task(strategy).execute(ctx(DAY, "dropped", 2))  # type: ignore[arg-type]
    rerun_seconds = time.monotonic() - rerun_started
    warehouse.engine.dispose()
    figures = lost_and_duplicated(warehouse.engine, clean)
    writes = store.writes(run_id="dropped", status="written")
    ok = (
        error is not None
        and bool(dropped_at)
        and unchanged
        and not any(figures.values())
        and [w["try_number"] for w in writes] == [2]
    )
    reliability.record(
        suite="fault",
        case=f"fault/connection_dropped/{warehouse.kind}/{strategy}",
        database=warehouse.kind,
        strategy=strategy,
        crash_point=f"connection dropped mid-INSERT at sale_id {row}",
        reruns=1,
        rows_lost=figures.pop("rows_lost"),
        duplicates=figures.pop("duplicates"),
        outcome="ok" if ok else "broken",
        fault="connection_dropped",
        error=f"{type(error).__name__}: {str(error).splitlines()[0][:160]}" if error else None,
        seconds_to_error=round(failed_after, 3),
        rerun_seconds=round(rerun_seconds, 3),
        nothing_committed=unchanged,
        history_writes=len(writes),
        **figures,
    )
    assert ok, (error, dropped_at, unchanged, figures, writes)


# --------------------------------------------------------------------------------------------
# History store down
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says anything (a hung store)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        server.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "warehouse, how",
    [
        ("postgres", "refused"),
        ("mariadb", "refused"),
        ("sqlite", "refused"),
        ("duckdb", "refused"),
        ("sqlite", "hung"),
    ],
    indirect=["warehouse"],
)
def test_history_store_down(
    warehouse: Any,
    how: str,
    reliability: Recorder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    damaged_start(warehouse.engine)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    clean = expected_table(warehouse.engine, "overwrite")
    spool = Spool(tmp_path / "idempotent_spool")
    with contextlib.ExitStack() as stack:
        port = stack.enter_context(silent_server()) if how == "hung" else closed_port()
        down = {
            "conn_type": "postgres",
            "host": "127.0.0.1",
            "port": port,
            "login": "postgres",
            "schema": "h",
        }
        monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps(down))
        started = time.monotonic()
        result = make_task("overwrite").execute(ctx(DAY, "store_down", 1))  # type: ignore[arg-type]
        down_seconds = time.monotonic() - started
        spooled = spool.count()
        # a guarded backfill with the store down refuses before writing (fail closed)
        reset(warehouse.engine)
        before = table_checksum(warehouse.engine, "payouts")
        conf = {"semantics": "corrective", "reason": "reliability", "policy_version": "v1"}
        refused: str | None = None
        try:
            make_task("guarded_swap").execute(ctx(DAY, "backfill_down", 1, "backfill", conf))  # type: ignore[arg-type]
        except GuardRefusal as err:
            refused = str(err)[:160]
        guarded_unchanged = table_checksum(warehouse.engine, "payouts") == before
        make_task("overwrite").execute(ctx(DAY, "store_down", 1))  # type: ignore[arg-type]  # back as it was
    warehouse.engine.dispose()
    # the store comes back: the next write delivers what was spooled
    store = history_at(tmp_path / "history.db", monkeypatch)
    started = time.monotonic()
    make_task("overwrite").execute(ctx(DAY, "store_back", 1))  # type: ignore[arg-type]
    up_seconds = time.monotonic() - started
    warehouse.engine.dispose()
    writes = store.writes(status="written")
    figures = lost_and_duplicated(warehouse.engine, clean)
    ok = (
        result.get("ordinal") is None
        and spooled >= 1
        and refused is not None
        and guarded_unchanged
        and spool.count() == 0
        and [w["run_id"] for w in writes] == ["store_down", "store_back"]
        and [w["ordinal"] for w in writes] == [1, 2]
        and not any(figures.values())
    )
    reliability.record(
        suite="fault",
        case=f"fault/history_store_{how}/{warehouse.kind}",
        database=warehouse.kind,
        strategy="overwrite",
        crash_point=f"history store {how}",
        reruns=1,
        rows_lost=figures.pop("rows_lost"),
        duplicates=figures.pop("duplicates"),
        outcome="ok" if ok else "broken",
        fault=f"history_store_{how}",
        write_seconds_store_down=round(down_seconds, 3),
        write_seconds_store_up=round(up_seconds, 3),
        records_spooled=spooled,
        records_delivered_later=len(writes) - 1,
        guarded_backfill_refused=refused,
        guarded_backfill_wrote_nothing=guarded_unchanged,
        history_writes=len(writes),
        **figures,
    )
    assert ok, (result, spooled, refused, guarded_unchanged, spool.count(), writes, figures)


# --------------------------------------------------------------------------------------------
# The history store refuses a record (found by the hostile-conf e2e test)
# --------------------------------------------------------------------------------------------

LONG_SEMANTICS = "corrective: " + "x" * 28  # 40 characters; the column holds 32


def pg_history(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    url = sa.engine.make_url(pg_url)
    conn = {
        "conn_type": "postgres",
        "host": url.host,
        "port": url.port,
        "login": url.username,
        "schema": url.database,
    }
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps(conn))
    store = HistoryStore(sa.create_engine(pg_url, poolclass=NullPool))
    store.migrate()
    with store.engine.begin() as c:
        c.execute(sa.text("DELETE FROM idem_window_write"))
    return store


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_history_store_refuses_a_record(
    warehouse: Any, pg_url: str, reliability: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose conf says semantics longer than the column (32 characters): the write itself must
    succeed; measured: is its record stored, and are the records after it stored?"""
    damaged_start(warehouse.engine)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    store = pg_history(pg_url, monkeypatch)
    spool = Spool(tmp_path / "idempotent_spool")
    make_task("overwrite").execute(ctx(DAY, "long_semantics", 1, conf={"semantics": LONG_SEMANTICS}))  # type: ignore[arg-type]
    after_poison = spool.count()
    later = 0
    for n in range(1, 31):  # thirty ordinary writes after it, each delivering the spool first
        make_task("overwrite").execute(ctx(DAY, "after_it", n))  # type: ignore[arg-type]
        later += 1
    warehouse.engine.dispose()
    stored = store.writes()
    names = [p.name for p in spool.pending()]
    longest = max((len(n) for n in names), default=0)
    stuck = spool.count()
    ok = len(stored) == 1 + later and stuck == 0
    reliability.record(
        suite="fault",
        case="fault/history_record_refused/postgres",
        database="postgres",
        strategy="overwrite",
        crash_point=f"conf semantics of {len(LONG_SEMANTICS)} characters (column: 32)",
        reruns=later,
        rows_lost=0,
        duplicates=0,
        outcome="ok" if ok else "finding",
        fault="history_record_refused",
        records_written=1 + later,
        records_stored=len(stored),
        records_left_in_spool=stuck,
        spooled_after_the_refused_one=after_poison,
        spool_files=len(names),
        longest_spool_file_name=longest,
    )
    assert later == 30  # the table writes themselves never failed


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_a_semantics_longer_than_the_column_is_still_recorded(
    warehouse: Any, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    damaged_start(warehouse.engine)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    store = pg_history(pg_url, monkeypatch)
    make_task("overwrite").execute(ctx(DAY, "long_semantics", 1, conf={"semantics": LONG_SEMANTICS}))  # type: ignore[arg-type]
    assert [w["run_id"] for w in store.writes()] == ["long_semantics"]


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_a_refused_record_does_not_block_the_records_after_it(
    warehouse: Any, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    damaged_start(warehouse.engine)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    store = pg_history(pg_url, monkeypatch)
    poison = make_task("overwrite")
    poison.execute(ctx(DAY, "long_semantics", 1, conf={"semantics": LONG_SEMANTICS}))  # type: ignore[arg-type]
    # A run id of its own: the store is the session's, and another test wrote "after_it" up to try 30
    # (which would fence a try 1 of that run).
    make_task("overwrite").execute(ctx(DAY, "after_the_refused", 1))  # type: ignore[arg-type]
    assert "after_the_refused" in [w["run_id"] for w in store.writes()]


# --------------------------------------------------------------------------------------------
# A zombie attempt beside its retry
# --------------------------------------------------------------------------------------------


def _attempt(strategy: str, try_number: int, slow_at: int | None, reached: Any, out: Any) -> None:
    """One attempt in a forked child: report (status, seconds, lock waits, error)."""
    waits: list[tuple[str, float]] = []
    probe.time_locks(waits)
    if slow_at is not None:
        probe.arm_inserts(slow_at, 2.0, reached.set)
    started = time.monotonic()
    try:
        make_task(strategy).execute(ctx(DAY, "zombie", try_number))  # type: ignore[arg-type]
        status, error = "completed", None
    except BaseException as err:
        status, error = "failed", f"{type(err).__name__}: {err}"[:300]
    window_waits = [w for t, w in waits if not t.startswith("history:")]
    out.put((try_number, status, time.monotonic() - started, window_waits[:1], error))
    os._exit(0)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_zombie_attempt_beside_its_retry(
    warehouse: Any,
    strategy: str,
    reliability: Recorder,
    reliability_seed: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    damaged_start(warehouse.engine)
    store = history_at(tmp_path / "history.db", monkeypatch)
    clean = expected_table(warehouse.engine, strategy)
    warehouse.engine.dispose()
    row = FIRST_SALE + reliability_seed % 1000
    fork = multiprocessing.get_context("fork")
    reached, out = fork.Event(), fork.SimpleQueue()
    zombie = fork.Process(target=_attempt, args=(strategy, 1, row, reached, out))
    zombie.start()
    inside = reached.wait(60)  # the zombie is inside its INSERT, holding the window's lock
    retry = fork.Process(target=_attempt, args=(strategy, 2, None, reached, out))
    retry.start()
    results = {}
    for proc in (zombie, retry):
        proc.join(120)
    while not out.empty():
        try_number, status, seconds, waits, error = out.get()
        results[try_number] = {
            "status": status,
            "seconds": round(seconds, 3),
            "lock_wait": waits,
            "error": error,
        }
    figures = lost_and_duplicated(warehouse.engine, clean)
    writes = store.writes(run_id="zombie", status="written")
    fenced = store.writes(run_id="zombie", status="fenced")
    order = [w["try_number"] for w in writes]
    lock_wait = (results.get(2, {}).get("lock_wait") or [0.0])[0]
    # The retry raised the window's fence before it waited for the zombie's lock, so the zombie, slowed
    # inside its INSERT, finds a newer try at its last check and rolls back: only try 2 writes.
    ok = (
        inside
        and sorted(results) == [1, 2]
        and results[1]["status"] == "failed"
        and (results[1]["error"] or "").startswith("FencedError")
        and results[2]["status"] == "completed"
        and not any(figures.values())
        and order == [2]
        and [w["try_number"] for w in fenced] == [1]
    )
    reliability.record(
        suite="fault",
        case=f"fault/zombie_beside_retry/{warehouse.kind}/{strategy}",
        database=warehouse.kind,
        strategy=strategy,
        crash_point="zombie (try 1, slowed inside its INSERT) beside its retry (try 2)",
        reruns=1,
        rows_lost=figures.pop("rows_lost"),
        duplicates=figures.pop("duplicates"),
        outcome="ok" if ok else "broken",
        fault="zombie_beside_retry",
        attempts=results,
        retry_lock_wait_seconds=round(lock_wait, 3),
        history_order=order,
        history_writes=len(writes),
        **figures,
    )
    assert ok, (inside, results, figures, writes)


# --------------------------------------------------------------------------------------------
# The database restarted during a backfill (a private PostgreSQL)
# --------------------------------------------------------------------------------------------

PG_BIN = Path(os.environ.get("IDEM_PG_BIN", "/usr/lib/postgresql/15/bin"))


class PrivatePostgres:
    """A PostgreSQL server of this test alone: initdb in a temporary directory, a free port."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="idem_private_pg_"))
        self.data = self.base / "data"
        self.port = closed_port()
        self.as_postgres: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
            import pwd

            user = pwd.getpwnam("postgres")
            os.chown(self.base, user.pw_uid, user.pw_gid)
            self.as_postgres = ["runuser", "-u", "postgres", "--"]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*self.as_postgres, *args], capture_output=True, text=True, timeout=timeout, cwd=self.base
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{args[0]} failed ({proc.returncode}): {proc.stdout[-1500:]}{proc.stderr[-1500:]}"
            )
        return proc

    def pg_ctl(self, *args: str) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.base} -c max_connections=50"
        self.run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.base / "log"),
            "-w",
            "-o",
            options,
            *args,
        )

    def start(self) -> None:
        self.run(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        self.pg_ctl("start")

    def restart_immediate(self) -> float:
        """`pg_ctl restart -m immediate`: every backend killed, crash recovery, back up. Seconds down."""
        started = time.monotonic()
        self.pg_ctl("-m", "immediate", "restart")
        return time.monotonic() - started

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{db}"

    def conn_json(self, db: str = "postgres") -> str:
        return json.dumps(
            {
                "conn_type": "postgres",
                "host": "127.0.0.1",
                "port": self.port,
                "login": "postgres",
                "schema": db,
            }
        )


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PrivatePostgres]:
    if not (PG_BIN / "initdb").exists():
        pytest.fail(f"no initdb in {PG_BIN}: set IDEM_PG_BIN to PostgreSQL's bin directory", pytrace=False)
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.stop()


WINDOWS = 20
RETRIES = 5


@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_database_restarted_during_a_backfill(
    private_pg: PrivatePostgres,
    strategy: str,
    reliability: Recorder,
    reliability_seed: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backfill of 20 windows, retried per window as Airflow would; the warehouse *and* the
    history store are on the private server, which restarts (immediate) during window 6's INSERT."""
    db = f"restart_{strategy}"
    admin = sa.create_engine(private_pg.url(), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
    admin.dispose()
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", private_pg.conn_json(db))
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", private_pg.conn_json(db))
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    engine = sa.create_engine(private_pg.url(db), poolclass=NullPool)
    create_sales(engine)
    create_payouts(engine)
    probe.install(engine)
    days = [date(2026, 8, 1) + timedelta(days=i) for i in range(WINDOWS)]
    struck = 5  # the sixth window
    row = FIRST_SALE + reliability_seed % 1000 - (DAY - days[struck]).days * 2000
    reached = threading.Event()
    downtime: list[float] = []

    def restart() -> None:
        if reached.wait(120):
            downtime.append(private_pg.restart_immediate())

    restarter = threading.Thread(target=restart, daemon=True)
    restarter.start()
    attempts: list[dict[str, Any]] = []
    started = time.monotonic()
    for i, day in enumerate(days):
        restore = probe.arm_inserts(row, 3.0, reached.set) if i == struck else None
        for try_number in range(1, RETRIES + 1):
            t0 = time.monotonic()
            try:
                make_task(strategy).execute(ctx(day, f"backfill__{day}", try_number, "backfill"))  # type: ignore[arg-type]
                attempts.append(
                    {"window": str(day), "try": try_number, "status": "ok", "seconds": time.monotonic() - t0}
                )
                break
            except Exception as err:
                attempts.append(
                    {
                        "window": str(day),
                        "try": try_number,
                        "status": type(err).__name__,
                        "seconds": time.monotonic() - t0,
                    }
                )
                # the retry delay, exponential as Airflow's retry_exponential_backoff: a restart on a
                # loaded machine takes 5 s and more, longer than five 1 s retries
                time.sleep(min(2 ** (try_number - 1), 8))
            finally:
                if restore is not None:
                    restore()
                    restore = None
    wall = time.monotonic() - started
    restarter.join(60)
    # every window right, nothing else in the table
    per_window = {str(day): window_totals(engine, "payouts", day) for day in days}
    truth = {str(day): day_truth(day) for day in days}
    with engine.connect() as conn:
        total, distinct = conn.execute(sa.text("SELECT count(*), count(DISTINCT sale_id) FROM payouts")).one()
    lost = sum(max(0, truth[d][0] - per_window[d][0]) for d in truth)
    wrong_sums = [d for d in truth if per_window[d][1] != truth[d][1]]
    store = HistoryStore(engine)
    succeeded = [a for a in attempts if a["status"] == "ok"]
    with contextlib.suppress(Exception):  # anything still spooled is delivered by one more record
        Spool(tmp_path / "idempotent_spool").deliver(store)
    writes = store.writes(status="written")
    recorded = {(w["run_id"], w["try_number"]) for w in writes}
    expected = {(f"backfill__{a['window']}", a["try"]) for a in succeeded}
    engine.dispose()
    failed = [a for a in attempts if a["status"] != "ok"]
    ok = (
        bool(downtime)
        and len(succeeded) == WINDOWS
        and lost == 0
        and total == distinct == WINDOWS * 2000
        and not wrong_sums
        and recorded == expected
    )
    reliability.record(
        suite="fault",
        case=f"fault/database_restart_during_backfill/postgres/{strategy}",
        database="postgres",
        strategy=strategy,
        crash_point=f"pg_ctl restart -m immediate during window {struck + 1}'s INSERT (sale_id {row})",
        reruns=len(failed),
        rows_lost=lost,
        duplicates=int(total) - int(distinct),
        outcome="ok" if ok else "broken",
        fault="database_restart",
        windows=WINDOWS,
        windows_right=WINDOWS - len(wrong_sums),
        failed_attempts=len(failed),
        failed_by=sorted({a["status"] for a in failed}),
        restart_seconds=round(downtime[0], 2) if downtime else None,
        backfill_seconds=round(wall, 1),
        history_writes=len(writes),
        history_complete=recorded == expected,
    )
    assert ok, (downtime, failed, lost, total, distinct, wrong_sums, recorded ^ expected)


# --------------------------------------------------------------------------------------------
# e2e: the scheduler killed (with its LocalExecutor workers) during a guarded backfill
# --------------------------------------------------------------------------------------------

RESTART_DAG = "idem_rel_guarded_restart"
RESTART_WINDOWS = 20
RESTART_PER_DAY = 200
RESTART_DAG_FILE = '''
"""Reliability: a guarded payouts DAG for the scheduler-restart fault."""
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig, Thresholds
from airflow_idempotent.operators import PartitionOverwriteOperator

GUARD = GuardConfig(cap=31, measures=["amount_eur"], thresholds=Thresholds(max_shrink=0.10))

with DAG(
    dag_id="{dag_id}",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
    end_date=pendulum.datetime(2026, 8, 31, tz="UTC"),
    catchup=False,
    params={{"policy_version": Param("v1", type="string", enum=["v1", "v2"]), **GUARD.param()}},
    default_args={{"retries": 3, "retry_delay": timedelta(seconds=5)}},
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="{conn_id}",
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL + " AND slow_source(s.sale_id) = s.sale_id",
        parameters={{"policy_version": "{{{{ params.policy_version }}}}"}},
        granularity="day",
    )
'''
#: A source that takes 2 s per window (at its 7th sale), so a kill finds writes in their transaction.
SLOW_SOURCE = f"""
CREATE OR REPLACE FUNCTION slow_source(id BIGINT) RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF id % {RESTART_PER_DAY} = 7 THEN
        PERFORM pg_sleep(2);
    END IF;
    RETURN id;
END $$
"""


#: Seconds between the restarted scheduler's orphan checks (Airflow's default: 300).
ORPHAN_CHECK = 20.0


def airflow_setting(name: str) -> float:
    """A [scheduler] setting as the cluster has it (the suite sets none of these: Airflow's default)."""
    from airflow.configuration import conf

    return conf.getfloat("scheduler", name)


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_scheduler_killed_during_a_guarded_backfill(
    reliability_dags: Path, request: pytest.FixtureRequest, reliability: Recorder
) -> None:
    cluster = request.getfixturevalue("reliability_cluster")
    conn_id, url = cluster.new_warehouse("restart")
    engine = sa.create_engine(url)
    create_sales(engine, days=31, per_day=RESTART_PER_DAY)
    create_payouts(engine)
    with engine.begin() as conn:
        conn.execute(sa.text(SLOW_SOURCE))
    days = [date(2026, 8, 1) + timedelta(days=i) for i in range(RESTART_WINDOWS)]

    for day in days:  # production holds v1; the backfill is a corrective one to v2
        simulate_crash(engine, day, rows=RESTART_PER_DAY)
    (reliability_dags / "idem_rel_guarded_restart.py").write_text(
        RESTART_DAG_FILE.format(dag_id=RESTART_DAG, conn_id=conn_id)
    )
    cluster.wait_for(
        "the DAG to be parsed", lambda: cluster.request("GET", f"/api/v2/dags/{RESTART_DAG}"), 240
    )
    cluster.request("PATCH", f"/api/v2/dags/{RESTART_DAG}", {"is_paused": False})
    conf = {"semantics": "corrective", "reason": "reliability: scheduler restart", "policy_version": "v2"}
    created = cluster.request(
        "POST",
        "/api/v2/backfills",
        {
            "dag_id": RESTART_DAG,
            "from_date": f"{days[0]}T00:00:00Z",
            "to_date": f"{days[-1]}T00:00:00Z",
            "max_active_runs": 4,
            "dag_run_conf": conf,
        },
    )

    def states() -> Counter[str]:
        runs = cluster.request("GET", f"/api/v2/dags/{RESTART_DAG}/dagRuns?limit=100")["dag_runs"]
        return Counter(r["state"] for r in runs)

    def running() -> list[str] | None:
        """Once five windows are done: the task instances running now (their writes are in flight)."""
        if states()["success"] < 5:
            return None
        tis = cluster.request("GET", f"/api/v2/dags/{RESTART_DAG}/dagRuns/~/taskInstances?limit=100")
        return [t["dag_run_id"] for t in tis["task_instances"] if t["state"] == "running"] or None

    in_flight = cluster.wait_for("five windows written and writes running", running, timeout=600, every=0.5)
    done_before = states()["success"]
    old = cluster.processes["scheduler"]
    killed_at = time.monotonic()
    os.killpg(old.pid, 9)  # SIGKILL: the scheduler and its LocalExecutor workers, mid-task
    old.wait(30)
    cluster.retired.append(old)
    time.sleep(3)
    # The new scheduler resets the dead one's task instances at its orphan check: every 300 s by
    # default, here every ORPHAN_CHECK s so the case costs a minute, not six (a deployment sets
    # the same to recover sooner); the rest of the cluster keeps Airflow's defaults.
    cluster.start(
        "scheduler",
        extra_env={"AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": str(ORPHAN_CHECK)},
    )
    cluster.wait_for(
        "the backfill to complete",
        lambda: cluster.request("GET", f"/api/v2/backfills/{created['id']}")["completed_at"],
        timeout=900,
        every=5,
    )
    recovered = time.monotonic() - killed_at
    final = states()
    tis = cluster.request("GET", f"/api/v2/dags/{RESTART_DAG}/dagRuns/~/taskInstances?limit=100")[
        "task_instances"
    ]
    tries = Counter(int(t["try_number"]) for t in tis)
    # every window holds the v2 truth, nothing else
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "WITH truth AS (SELECT sale_date, count(*) AS n, sum(round(price_eur * "
                "CASE WHEN price_eur >= 400 THEN 0.55 ELSE 0.60 END, 2)) AS total FROM sales "
                "WHERE sale_date BETWEEN :a AND :b GROUP BY sale_date), "
                "got AS (SELECT sale_date, count(*) AS n, count(DISTINCT sale_id) AS keys, "
                "sum(amount_eur) AS total FROM payouts GROUP BY sale_date) "
                "SELECT t.sale_date, t.n, coalesce(g.n, 0), coalesce(g.keys, 0), t.total, g.total "
                "FROM truth t LEFT JOIN got g USING (sale_date)"
            ),
            {"a": days[0], "b": days[-1]},
        ).all()
    engine.dispose()
    lost = sum(max(0, n - got) for _, n, got, _, _, _ in rows)
    duplicates = sum(got - keys for _, _, got, keys, _, _ in rows)
    right = sum(1 for _, n, got, _, total, got_total in rows if (n, total) == (got, got_total))
    hist_engine = sa.create_engine(cluster.history_url)
    try:
        writes = [w for w in HistoryStore(hist_engine).writes(dag_id=RESTART_DAG) if w["status"] == "written"]
    finally:
        hist_engine.dispose()
    windows_recorded = {w["window_label"] for w in writes}
    cluster.request("PATCH", f"/api/v2/dags/{RESTART_DAG}", {"is_paused": True})
    cluster.check_alive()
    ok = (
        final["success"] == RESTART_WINDOWS
        and right == RESTART_WINDOWS
        and lost == 0
        and duplicates == 0
        and len(windows_recorded) == RESTART_WINDOWS
        and {w["semantics"] for w in writes} == {"corrective"}
    )
    reliability.record(
        suite="fault",
        case="fault/scheduler_killed_during_guarded_backfill/postgres/guarded_swap",
        database="postgres",
        strategy="guarded_swap",
        crash_point="SIGKILL to the scheduler's process group (scheduler + LocalExecutor workers)",
        reruns=sum(n for t, n in tries.items() if t > 1),
        rows_lost=lost,
        duplicates=duplicates,
        outcome="ok" if ok else "broken",
        fault="scheduler_restart",
        windows=RESTART_WINDOWS,
        windows_done_before_kill=done_before,
        task_instances_in_flight_at_kill=len(in_flight),
        in_flight_runs=in_flight,
        seconds_from_kill_to_backfill_complete=round(recovered, 1),
        orphaned_tasks_check_interval_seconds=ORPHAN_CHECK,
        scheduler_health_check_threshold_seconds=airflow_setting("scheduler_health_check_threshold"),
        task_instance_heartbeat_timeout_seconds=airflow_setting("task_instance_heartbeat_timeout"),
        run_states=dict(final),
        try_numbers=dict(tries),
        windows_right=right,
        history_writes=len(writes),
        history_windows=len(windows_recorded),
    )
    assert ok, (final, right, lost, duplicates, len(windows_recorded), tries)

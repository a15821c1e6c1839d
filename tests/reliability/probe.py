"""A probe inside the job's own SELECT: act at a chosen row while an INSERT ... SELECT is running.

The reliability tests need to strike in the middle of a statement, not between statements: a
kill "mid-insert at row N", a connection dropped while the INSERT runs, a slow attempt that
holds the window's lock. The job's SQL is the payouts SELECT with one more condition,
``AND idem_probe(s.sale_id) = s.sale_id``: a function that returns its argument (so the rows
are the job's rows) and, when armed for the current statement, acts when it reads sale_id N. It
sits in the WHERE clause, not on the key, so the merge's correlated key lookups still use the
source's primary key:

- SQLite and DuckDB: a Python function registered on every connection; it runs inside the
  database engine, in the middle of the statement, and calls the test's hook there (which may
  SIGKILL the process, so the database dies half way through the INSERT).
- PostgreSQL and MariaDB: a server-side function (PL/pgSQL, SQL/PSM) that sleeps at sale_id N.
  A watcher thread in the client sees the session sleeping (pg_stat_activity wait_event
  ``PgSleep``; PROCESSLIST state ``User sleep``) and calls the hook then: the server is inside
  the INSERT, at row N, with the earlier rows written and uncommitted.

The probe is armed only around INSERT statements whose SELECT calls it (the adapter's
``execute`` is wrapped), so the merge's key checks, the counts and the diff never trigger it.
Whether the earlier rows have been written when row N is read depends on whether the database
streams the SELECT into the INSERT (SQLite, PostgreSQL, DuckDB, and MariaDB with derived_merge)
or materialises it first; either way the kill happens inside the INSERT statement.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool, Pool

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.examples.payouts import PAYOUT_SQL

PROBE = "idem_probe"
PROBE_SQL = f"{PAYOUT_SQL} AND {PROBE}(s.sale_id) = s.sale_id"
assert PAYOUT_SQL.endswith("s.sale_date < :window_end")

Hook = Callable[[], None]


class _Armed:
    """The in-process probe's state (SQLite, DuckDB): which row, and what to do there."""

    at: int | None = None
    hook: Hook | None = None
    sleep: float = 0.0
    hits: int = 0
    calls: int = 0


ARMED = _Armed()


def _py_probe(value: Any) -> Any:
    if ARMED.at is not None:
        ARMED.calls += 1
        if value == ARMED.at:
            ARMED.hits += 1
            if ARMED.hook is not None:
                ARMED.hook()
            if ARMED.sleep:
                time.sleep(ARMED.sleep)
    return value


@event.listens_for(Pool, "connect")
def _register(dbapi_conn: Any, _record: Any) -> None:
    """Every new SQLite or DuckDB connection of this process (and its forks) gets the probe."""
    if isinstance(dbapi_conn, sqlite3.Connection):
        dbapi_conn.create_function(PROBE, 1, _py_probe)
        return
    raw = getattr(dbapi_conn, "_ConnectionWrapper__c", None)
    if raw is not None and "duckdb" in type(raw).__module__:
        try:
            from duckdb import sqltypes as types
        except ImportError:  # duckdb < 1.4
            from duckdb import typing as types  # type: ignore[no-redef,attr-defined]
        try:
            raw.create_function(PROBE, _py_probe, [types.BIGINT], types.BIGINT, side_effects=True)
        except Exception as err:  # connections of one process share a database instance, and its functions
            if "already exists" not in str(err):
                raise


_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {PROBE}(id BIGINT) RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF id = NULLIF(current_setting('idem.probe_at', true), '')::BIGINT THEN
        PERFORM pg_sleep(NULLIF(current_setting('idem.probe_sleep', true), '')::float8);
    END IF;
    RETURN id;
END $$
"""
_MARIADB_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {PROBE}(id BIGINT) RETURNS BIGINT NOT DETERMINISTIC NO SQL
BEGIN
    IF id = @idem_probe_at THEN
        DO SLEEP(@idem_probe_sleep);
    END IF;
    RETURN id;
END
"""


def install(engine: Engine) -> None:
    """Create the server-side probe in this database (no-op for SQLite and DuckDB)."""
    name = engine.dialect.name
    if name in ("postgresql", "mysql"):
        with engine.begin() as conn:
            conn.execute(sa.text(_PG_FUNCTION if name == "postgresql" else _MARIADB_FUNCTION))


# --------------------------------------------------------------------------------------------
# Arming the probe for one statement
# --------------------------------------------------------------------------------------------


def session_id(conn: Connection) -> int:
    query = "SELECT pg_backend_pid()" if conn.dialect.name == "postgresql" else "SELECT CONNECTION_ID()"
    return int(conn.execute(sa.text(query)).scalar_one())


def sleeping(admin: Connection, dialect: str, sid: int) -> bool:
    """Is session `sid` inside the probe's sleep?"""
    if dialect == "postgresql":
        query = "SELECT wait_event FROM pg_stat_activity WHERE pid = :sid"
        return admin.execute(sa.text(query), {"sid": sid}).scalar() == "PgSleep"
    query = "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = :sid"
    return admin.execute(sa.text(query), {"sid": sid}).scalar() == "User sleep"


def kill_session(admin: Connection, dialect: str, sid: int) -> None:
    """Drop session `sid` from the server side: pg_terminate_backend, MariaDB KILL CONNECTION."""
    if dialect == "postgresql":
        admin.execute(sa.text("SELECT pg_terminate_backend(:sid)"), {"sid": sid})
    else:
        admin.execute(sa.text(f"KILL CONNECTION {int(sid)}"))


@contextlib.contextmanager
def armed(
    conn: Connection,
    at: int,
    sleep: float,
    hook: Hook | None,
    on_session: Callable[[int], None] | None = None,
) -> Iterator[None]:
    """Arm the probe on `conn` for the statement run inside the block: at sale_id `at`, call
    `hook` (in-process databases: inside the statement; servers: from a watcher thread when the
    session sleeps there) and sleep `sleep` seconds."""
    dialect = conn.dialect.name
    if dialect in ("sqlite", "duckdb"):
        ARMED.at, ARMED.hook, ARMED.sleep, ARMED.hits, ARMED.calls = at, hook, sleep, 0, 0
        try:
            yield
        finally:
            ARMED.at, ARMED.hook, ARMED.sleep = None, None, 0.0
        return
    sid = session_id(conn)
    if on_session is not None:
        on_session(sid)
    if dialect == "postgresql":
        conn.execute(
            sa.text(
                "SELECT set_config('idem.probe_at', :at, true), set_config('idem.probe_sleep', :s, true)"
            ),
            {"at": str(at), "s": str(sleep)},
        )
    else:
        conn.execute(sa.text("SET @idem_probe_at = :at, @idem_probe_sleep = :s"), {"at": at, "s": sleep})
    stop = threading.Event()
    watcher = None
    if hook is not None:
        url = conn.engine.url

        def watch() -> None:
            engine = sa.create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
            try:
                with engine.connect() as admin:
                    while not stop.is_set():
                        if sleeping(admin, dialect, sid):
                            hook()
                            return
                        time.sleep(0.01)
            finally:
                engine.dispose()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    try:
        yield
    finally:
        stop.set()
        if watcher is not None:
            watcher.join(10)
        with contextlib.suppress(Exception):  # the session may be gone: that is the point
            if dialect == "mysql":
                conn.execute(sa.text("SET @idem_probe_at = NULL"))


def arm_inserts(
    at: int,
    sleep: float,
    hook: Hook | None,
    on_session: Callable[[int], None] | None = None,
    once: bool = True,
) -> Callable[[], None]:
    """Wrap EngineAdapter.execute so the next INSERT whose SELECT calls the probe runs armed.

    Returns the function that puts the real execute back (child processes never need it).
    """
    real = EngineAdapter.execute
    state = {"fired": False}

    def execute(self: EngineAdapter, conn: Connection, expression: Any, params: Any) -> Any:
        if (
            getattr(expression, "key", "") == "insert"
            and not (once and state["fired"])
            and PROBE in self.render(expression).lower()
        ):
            state["fired"] = True
            with armed(conn, at, sleep, hook, on_session):
                return real(self, conn, expression, params)
        return real(self, conn, expression, params)

    EngineAdapter.execute = execute  # type: ignore[method-assign]

    def restore() -> None:
        EngineAdapter.execute = real  # type: ignore[method-assign]

    return restore


# --------------------------------------------------------------------------------------------
# How long an attempt waited for the (table, window) lock
# --------------------------------------------------------------------------------------------


def time_locks(waits: list[tuple[str, float]]) -> Callable[[], None]:
    """Wrap the adapters' locked_transaction (the base class's, driven by lock_style): append
    (table, seconds from asking for the transaction to holding it: connect + lock) to `waits`.
    Returns the function that unwraps."""
    originals: list[tuple[Any, Any]] = []
    for cls in (EngineAdapter,):
        real = cls.__dict__["locked_transaction"]

        def timed(
            self: Any, table: str, window: Any, timeout: float, connection: Any = None, *, _real: Any = real
        ) -> Any:
            @contextlib.contextmanager
            def block() -> Iterator[Connection]:
                started = time.monotonic()
                with _real(self, table, window, timeout, connection) as conn:
                    waits.append((table, time.monotonic() - started))
                    yield conn

            return block()

        originals.append((cls, real))
        setattr(cls, "locked_transaction", timed)  # noqa: B010 (a class attribute, on purpose)

    def restore() -> None:
        for cls, real in originals:
            setattr(cls, "locked_transaction", real)  # noqa: B010

    return restore

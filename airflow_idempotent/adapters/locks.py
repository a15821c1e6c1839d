"""The three ways a database keeps two attempts apart, picked by an adapter's `lock_style` flag.

- ``advisory`` (PostgreSQL): advisory locks on a 64-bit key, transaction-scoped
  (`pg_advisory_xact_lock` under a local `lock_timeout`) or session-scoped (`pg_try_advisory_lock`).
- ``get_lock`` (MariaDB/MySQL): named locks (`GET_LOCK`), which belong to the session, so a
  transaction's lock is taken before it begins and released after it ends.
- ``file`` (SQLite, DuckDB): a `flock` on a file beside the database file; the kernel drops it
  when the process dies.

Each style has a transaction lock (the (table, window) lock of a write, held until commit) and a
session lock (the effect ledger's owner lock, held across several transactions on a connection
of its own). Both are dropped by the database or the kernel when the process dies. Lock names
and keys derive from one resource string, so every database locks the same thing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import sqlalchemy as sa
import tenacity
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from airflow_idempotent.errors import LockTimeoutError

LockStyle = Literal["advisory", "get_lock", "file"]
#: Seconds between two tries of a file lock.
FILE_POLL_SECONDS = 0.05
#: First and longest pause between two tries of a session lock (doubling in between).
SESSION_POLL_FIRST = 0.02
SESSION_POLL_MAX = 0.25
#: PostgreSQL's SQLSTATE for "lock_timeout expired".
PG_LOCK_NOT_AVAILABLE = "55P03"


class LockId(NamedTuple):
    """A lock's name (named locks, lock files) and 64-bit key (advisory locks), from one resource."""

    name: str
    key: int

    @classmethod
    def of(cls, resource: str, prefix: str = "idem_") -> LockId:
        """Stable across processes and hosts: a SHA-256 of `resource`, short enough for every database."""
        digest = hashlib.sha256(resource.encode()).digest()
        return cls(prefix + digest.hex()[:40], int.from_bytes(digest[:8], "big", signed=True))


def lock_timeout_error(table: str, window: str, timeout: float, how: str) -> LockTimeoutError:
    """The error of a (table, window) lock not granted within `timeout` seconds (`how`: what was
    held), naming what to do: every lock of a write raises this one."""
    return LockTimeoutError(
        f"another attempt has been writing {table} for window {window} for more than "
        f"{timeout:g} s ({how}): wait for it to finish, or raise the operator's lock_timeout."
    )


def poll(attempt: Callable[[], bool], wait: float, pause: tenacity.wait.wait_base) -> bool:
    """Call `attempt` until it returns True or `wait` seconds have passed; the last answer.

    A zero `wait` tries exactly once. Used for locks a database (or flock) can only be *tried*.
    """
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_delay(wait),
        wait=pause,
        retry=tenacity.retry_if_result(lambda got: not got),
        retry_error_callback=lambda state: False,
        reraise=True,
    )
    return bool(retrying(attempt))


def session_pause() -> tenacity.wait.wait_base:
    """0.02 s, doubling up to 0.25 s: quick for a lock about to be free, light on a busy one."""
    return tenacity.wait_exponential(
        multiplier=SESSION_POLL_FIRST, min=SESSION_POLL_FIRST, max=SESSION_POLL_MAX
    )


# ----------------------------------------------------------------------------------- advisory
def local_setting(name: str, millis: int) -> sa.ColumnElement[Any]:
    """`set_config(name, '<millis>ms', true)`: a `SET LOCAL` of a timeout as an expression, value bound."""
    return sa.func.set_config(name, f"{max(0, millis)}ms", True)


def set_local_timeouts(conn: Connection | Session, millis: int, statement: bool = False) -> None:
    """`SET LOCAL lock_timeout` (and `statement_timeout`): this transaction only, values bound."""
    conn.execute(sa.select(local_setting("lock_timeout", millis)))
    if statement:
        conn.execute(sa.select(local_setting("statement_timeout", millis)))


#: `advisory_xact_lock`'s one statement. Text, not a construct: it runs on every write's and every
#: history record's fresh engine, where the nested selects' compile cost ~0.6 ms each time.
ADVISORY_XACT_LOCK = sa.text(
    "SELECT set_config('lock_timeout', '0ms', true) AS reset"
    " FROM (SELECT pg_advisory_xact_lock(:key) AS l"
    " FROM (SELECT set_config('lock_timeout', :timeout, true) AS t) AS bounded) AS locked"
)


def advisory_xact_lock(
    conn: Connection, lock: LockId, timeout: float, on_timeout: Callable[[], Exception]
) -> None:
    """pg_advisory_xact_lock under a local lock_timeout: the transaction's end releases it.

    One round trip: the timeout is set, the lock taken and the timeout reset in nested subqueries,
    which PostgreSQL evaluates inside out (a subquery calling a volatile function is never pulled
    up), so the wait is bounded and the statements after it are not. It ran three statements
    for every write and every history record.
    """
    try:
        conn.execute(ADVISORY_XACT_LOCK, {"key": lock.key, "timeout": f"{max(1, int(timeout * 1000))}ms"})
    except sa.exc.OperationalError as err:
        if getattr(err.orig, "pgcode", None) == PG_LOCK_NOT_AVAILABLE:
            raise on_timeout() from err
        raise


# ----------------------------------------------------------------------------------- transactions
# A transaction lock is one or several locks (a write over several periods takes each period's),
# always taken in the order given (callers pass periods oldest first), so two writes over
# overlapping periods queue instead of deadlocking.
@contextlib.contextmanager
def advisory_transaction(
    connect: Callable[[], Connection],
    locks: Sequence[LockId],
    timeout: float,
    on_timeout: Callable[[], Exception],
) -> Iterator[Connection]:
    """`connect`: the adapter's (`EngineAdapter.connect`), which may hand over an early connection,
    or a lent one whose open transaction (a READ COMMITTED read: `history.link`) this continues."""
    with connect() as conn, conn.get_transaction() or conn.begin():
        for lock in locks:
            advisory_xact_lock(conn, lock, timeout, on_timeout)
        yield conn


@contextlib.contextmanager
def get_lock_transaction(
    connect: Callable[[], Connection],
    locks: Sequence[LockId],
    timeout: float,
    on_timeout: Callable[[], Exception],
) -> Iterator[Connection]:
    """GET_LOCK belongs to the session, not the transaction: taken by the transaction's first
    statements, released after its commit.

    No COMMIT between the lock and the write, nor after the release (2 round trips fewer than
    before): GET_LOCK reads no table, and InnoDB takes a transaction's snapshot at its first read
    of one, so every read of the write sees what committed before the lock was granted; the
    transaction RELEASE_LOCK begins ends with the connection (closing it rolls back, where the
    pool's reset sent a ROLLBACK after that COMMIT anyway).
    """
    with connect() as conn:
        held: list[LockId] = []
        try:
            with conn.begin():
                for lock in locks:
                    if conn.execute(sa.select(sa.func.GET_LOCK(lock.name, timeout))).scalar() != 1:
                        raise on_timeout()
                    held.append(lock)
                yield conn
        finally:
            conn.rollback()
            for lock in reversed(held):
                conn.execute(sa.select(sa.func.RELEASE_LOCK(lock.name)))


@contextlib.contextmanager
def file_lock(path: Path, timeout: float, on_timeout: Callable[[], Exception]) -> Iterator[None]:
    """flock on a file of its own; one open() per attempt, so threads exclude each other too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:

        def attempt() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        if not poll(attempt, timeout, tenacity.wait_fixed(FILE_POLL_SECONDS)):
            raise on_timeout()
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def file_transaction(
    engine: Engine,
    paths: Sequence[Path],
    timeout: float,
    on_timeout: Callable[[], Exception],
    release: Callable[[contextlib.ExitStack], None] | None = None,
) -> Iterator[Connection]:
    """The file locks wrap the whole transaction, from before the connection opens to after it
    closes. `release`: once committed, it is handed the connection's close and the locks' release
    (`adapters.late`: closed on a thread while the task records the write); else they run here."""
    with contextlib.ExitStack() as stack:
        for path in paths:
            stack.enter_context(file_lock(path, timeout, on_timeout))
        conn = stack.enter_context(engine.connect())
        with conn.begin():
            yield conn
        if release is not None:
            release(stack.pop_all())


# ----------------------------------------------------------------------------------- sessions
@contextlib.contextmanager
def tried_session_lock(
    engine: Engine, acquire: sa.Select[tuple[object]], release: sa.Select[tuple[object]], wait: float
) -> Iterator[None]:
    """Try `acquire` on a connection of its own until it answers 1/true or `wait` passes.

    Raises LockTimeoutError when it never did. The lock lasts until the block ends (then
    `release` runs), or until the process dies (the database drops the session's locks).
    """
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if not poll(lambda: conn.execute(acquire).scalar() in (1, True), wait, session_pause()):
            raise LockTimeoutError(f"the lock was held for {wait:g} s")
        try:
            yield
        finally:
            with contextlib.suppress(sa.exc.SQLAlchemyError):  # a dead connection released it already
                conn.execute(release)


def advisory_session_lock(
    engine: Engine, lock: LockId, wait: float
) -> contextlib.AbstractContextManager[None]:
    return tried_session_lock(
        engine,
        sa.select(sa.func.pg_try_advisory_lock(lock.key)),
        sa.select(sa.func.pg_advisory_unlock(lock.key)),
        wait,
    )


def get_lock_session_lock(
    engine: Engine, lock: LockId, wait: float
) -> contextlib.AbstractContextManager[None]:
    return tried_session_lock(
        engine,
        sa.select(sa.func.GET_LOCK(lock.name, 0)),
        sa.select(sa.func.RELEASE_LOCK(lock.name)),
        wait,
    )

"""One connection to the history store for the checks a write makes at one moment.

A write asks the store twice: before it writes (the kill switch, then its fence is raised) and
before it commits (the kill switch, then its fence is read again). Each check on a connection of
its own paid a pool checkout with its ping, a BEGIN and a ROLLBACK or COMMIT: 3 round trips more
per moment than the statements themselves, in every task. A `StoreLink` lends both checks of one
moment the same connection, opened by the first that asks (so a store that cannot answer fails
inside that check, which decides as before: refuse or warn), and closed when the moment ends.

It is not held across the write: a write may last hours, and a connection idle that long can be
dropped by the server, which would fail the check before commit (and refuse a guarded backfill).
A check that fails `discard`s the connection, so the next check opens one of its own, as before.
The kill switch read and the fence's statements share one transaction only where a read keeps
neither a snapshot nor a lock (`after_read`): on PostgreSQL, 8 round trips per moment become 5.

The moment before commit hands its connection on to the write's history record, which follows
the warehouse's commit within milliseconds (`release`, then `record`): the record's own pool
checkout paid the pool's liveness ping, one round trip more per write (2-10 ms under load). The
link itself travels to the record (`SafeHistory.record(record, link)`), so the lent connection's
rules (replaced if the server dropped it, closed if the record never took it) live here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import TracebackType
from typing import Protocol

import sqlalchemy as sa

from airflow_idempotent.history.store import HistoryStore, Record, StoredWrite


class Sharing(Protocol):
    """What runs its statements on a link's connection while the link is set (the attempt's fence)."""

    link: StoreLink | None


def reads_keep_nothing(conn: sa.Connection) -> bool:
    """Whether a read leaves nothing held until its transaction ends: PostgreSQL's READ COMMITTED
    takes a snapshot per statement and no row locks for a plain SELECT."""
    return conn.dialect.name == "postgresql" and conn.default_isolation_level == "READ COMMITTED"


class StoreLink:
    """The store's connection shared by the checks of one moment, opened on first use."""

    def __init__(self, store: HistoryStore | None) -> None:
        self.store = store  # None: no history, and no check asks for a connection
        self._conn: sa.Connection | None = None

    def connection(self) -> sa.Connection:
        """The moment's connection (the store's schema brought up to date first, once per process)."""
        if self._conn is None:
            if self.store is None:
                raise RuntimeError("a write without a history store has no store connection")
            self.store.migrate()
            self._conn = self.store.engine.connect()
        return self._conn

    def after_read(self) -> None:
        """End a read check's transaction where it would keep a snapshot (MySQL's REPEATABLE READ:
        the fence read after it would see the store as it was) or a lock (SQLite: a writer, the
        newer attempt raising its fence, would wait on it); PostgreSQL's READ COMMITTED reads keep
        neither, so there the next check's statements join the same transaction."""
        conn = self._conn
        if conn is not None and conn.in_transaction() and not reads_keep_nothing(conn):
            conn.rollback()

    def release(self) -> None:
        """End the moment's read transaction where `after_read` would (its checks only read;
        nothing to commit), keeping the connection open for `record`. PostgreSQL's READ COMMITTED
        transaction stays open and the record continues it (`locked_transaction` joins a lent
        connection's transaction): a ROLLBACK and a BEGIN fewer per write; it holds no row lock
        and no snapshot across the warehouse's commit, only the read tables' share locks (which
        a schema change of the store would wait on for that commit's milliseconds)."""
        try:
            self.after_read()
        except sa.exc.SQLAlchemyError:  # broken: whoever comes next opens a connection of its own
            self.discard()

    @contextlib.contextmanager
    def checks(self, *sharing: Sharing) -> Iterator[StoreLink]:
        """A moment's checks on this link: if one raises, the connection is discarded (its read
        transaction must not hold up what follows, such as the refusal's record); else `release`d.
        `sharing` (the fence) runs on the link inside the block: its `link` is set, then cleared."""
        for user in sharing:
            user.link = self
        try:
            yield self
        except BaseException:
            self.discard()
            raise
        finally:
            for user in sharing:
                user.link = None
        self.release()

    def record(self, record: Record) -> StoredWrite | None:
        """Store `record` (`HistoryStore.record`) on the connection `hand_over` gives, or on one of
        the store's own if there is none or the server dropped it (an idle timeout, a restart), as
        the pool's liveness ping would have done. Errors other than a dropped connection raise."""
        if self.store is None:
            raise RuntimeError("a write without a history store has no store to record in")
        conn = self.hand_over()
        if conn is not None:
            try:
                return self.store.record(record, conn)
            except sa.exc.DBAPIError as err:
                if not err.connection_invalidated:
                    raise
        return self.store.record(record)

    def hand_over(self) -> sa.Connection | None:
        """The open connection, for a caller that closes it (the history record after the write's
        commit), or None if the link has none (never opened, or discarded after a failure)."""
        conn, self._conn = self._conn, None
        return conn

    def discard(self) -> None:
        """Close the connection (rolling back what it did not commit); the next check opens its own."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sa.exc.SQLAlchemyError):  # broken: the pool replaces it
                conn.close()

    def __enter__(self) -> StoreLink:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.discard()

"""A server warehouse's connection opened in the background while the task does its other work.

A write's connection (TCP, authentication, the server's backend, SQLAlchemy's first-connect
queries) took 3-4 ms that the write waited for after its lint, fingerprint, kill switch check and
fence, none of which needs it. `EarlyConnection` opens it on a thread of its own as the write
begins; the write's transaction takes it (`EngineAdapter.connect`). Nothing runs on it before
then: it is the connection the write would have opened, opened sooner. Embedded files (DuckDB,
SQLite) are never opened early: their lock file is taken before the database is opened.
"""

from __future__ import annotations

import contextlib
import threading

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine


class EarlyConnection:
    """One connection of `engine`, opened by a thread as it is made; taken once, or closed."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._thread = threading.Thread(target=self._open, name="idempotent-early-connect", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        # A failure is left to the caller's own connect, which raises it where a write expects it.
        with contextlib.suppress(Exception):
            self._conn = self._engine.connect()

    def take(self) -> Connection | None:
        """The opened connection (waiting for it to open), or None if opening it failed."""
        self._thread.join()
        conn, self._conn = self._conn, None
        return conn

    def close(self) -> None:
        """Close the connection if nobody took it (the write refused or skipped before its transaction)."""
        conn = self.take()
        if conn is not None:
            with contextlib.suppress(sa.exc.SQLAlchemyError):
                conn.close()


class EarlyConnect:
    """The adapter's side (a part of `EngineAdapter`): open early, hand over, or close."""

    engine: Engine
    #: `open_early`'s connection, until the write's transaction takes it (a class default, so
    #: adapters with an `__init__` of their own have it too)
    early: EarlyConnection | None = None

    def open_early(self) -> None:
        """Start opening the write's connection in the background: a server's connect overlaps
        the task's lint, fingerprint and fence. Close it with `close_early`. Only for adapters
        whose lock is taken on the connection (`lock_style` advisory or get_lock)."""
        if getattr(self, "lock_style", None) in ("advisory", "get_lock") and self.early is None:
            self.early = EarlyConnection(self.engine)

    def close_early(self) -> None:
        early, self.early = self.early, None
        if early is not None:
            early.close()

    def connect(self) -> Connection:
        """A connection for the write's transaction: the one `open_early` opened, else a new one."""
        early, self.early = self.early, None
        conn = early.take() if early is not None else None
        return conn if conn is not None else self.engine.connect()

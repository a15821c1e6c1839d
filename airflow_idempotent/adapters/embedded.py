"""Embedded databases (SQLite, DuckDB): a per-(table, window) file lock beside the database file."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import Connection

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.errors import UnsupportedConnectionError
from airflow_idempotent.window import Window

POLL_SECONDS = 0.05


class EmbeddedAdapter(EngineAdapter):
    """Shared by SQLite and DuckDB: both are files, so the lock is a file lock (flock)."""

    lock_style = "file"

    def database_path(self) -> Path:
        database = self.engine.url.database
        if not database or database == ":memory:":
            raise UnsupportedConnectionError(
                f"the {self.dialect} connection has no database file: set the connection's host to an "
                'absolute file path, e.g. {"conn_type": "duckdb", "host": "/data/warehouse.duckdb"}.'
            )
        return Path(database)

    def lock_path(self, table: str, window: Window) -> Path:
        path = self.database_path()
        directory = path.with_name(path.name + ".locks")
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{self.lock_name(table, window)}.lock"

    @contextmanager
    def file_lock(self, table: str, window: Window, timeout: float) -> Iterator[None]:
        """flock on a file of its own; one open() per attempt, so threads exclude each other too."""
        path = self.lock_path(table, window)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise self.lock_timeout_error(
                            table, window, timeout, f"lock file {path} held"
                        ) from None
                    time.sleep(POLL_SECONDS)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    @contextmanager
    def locked_transaction(self, table: str, window: Window, timeout: float) -> Iterator[Connection]:
        """The file lock wraps the whole transaction, from before the connection opens to after commit."""
        with self.file_lock(table, window, timeout), self.engine.begin() as conn:
            yield conn

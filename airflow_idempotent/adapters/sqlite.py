"""SQLite: ON CONFLICT upserts, dates stored as ISO text, BEGIN IMMEDIATE transactions."""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlglot import exp

from airflow_idempotent.adapters.embedded import EmbeddedAdapter

BUSY_TIMEOUT_MS = 60_000
HASH_FUNCTION = "idem_hash"


def _hash31(text: str | None) -> int:
    """31 bits of SHA-256, so a SUM over millions of rows stays inside SQLite's 64-bit integers."""
    return int.from_bytes(hashlib.sha256((text or "").encode()).digest()[:4], "big") >> 1


class SQLiteAdapter(EmbeddedAdapter):
    dialect = "sqlite"
    upsert_style = "on_conflict"
    upsert_select_needs_where = True
    binds_temporal_as_text = True

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        if not getattr(engine, "_idem_sqlite_configured", False):
            event.listen(engine, "connect", self._on_connect)
            event.listen(engine, "begin", self._on_begin)
            engine._idem_sqlite_configured = True  # type: ignore[attr-defined]

    def row_hash(self, text: exp.Expr) -> exp.Expr:
        """SQLite has no hash function: a 31-bit one is registered on every connection."""
        return exp.Anonymous(this=HASH_FUNCTION, expressions=[text])

    @staticmethod
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        """Let SQLAlchemy, not pysqlite, open transactions; wait for other writers; add the hash."""
        dbapi_conn.isolation_level = None
        dbapi_conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        dbapi_conn.create_function(HASH_FUNCTION, 1, _hash31, deterministic=True)

    @staticmethod
    def _on_begin(conn: Any) -> None:
        """BEGIN IMMEDIATE takes SQLite's write lock up front, so DDL and DML are in the transaction."""
        conn.exec_driver_sql("BEGIN IMMEDIATE")

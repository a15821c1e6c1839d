"""SQLite: ON CONFLICT upserts, dates stored as ISO text, BEGIN IMMEDIATE transactions, a file lock."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlglot import exp

from airflow_idempotent.adapters.base import ColumnInfo, EngineAdapter
from airflow_idempotent.adapters.source_checks import OUTSIDE_MARK

BUSY_TIMEOUT_MS = 60_000
HASH_FUNCTION = "idem_hash"
ROW_HASH_FUNCTION = "idem_row_hash"
DECIMAL_SUM = "idem_decimal_sum"


def _hash31(text: str | None) -> int:
    """31 bits of SHA-256, so a SUM over millions of rows stays inside SQLite's 64-bit integers."""
    return int.from_bytes(hashlib.sha256((text or "").encode()).digest()[:4], "big") >> 1


def _row_hash31(*values: Any) -> int:
    """31 bits of SHA-256 of the row's stored values (typed: 1 and '1' differ), for checksum v2."""
    return int.from_bytes(hashlib.sha256(repr(values).encode()).digest()[:4], "big") >> 1


class _DecimalSum:
    """SUM in decimal arithmetic: SQLite stores DECIMAL columns as REAL, whose float sum drifts.

    Each REAL is read as its shortest round-trip text (0.6 -> "0.6"), the value it was written
    from, and added exactly; the result is text, so no float ever holds the total.
    """

    def __init__(self) -> None:
        self.total: Decimal | None = None

    def step(self, value: Any) -> None:
        if value is None:
            return
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(str(value))
        self.total = number if self.total is None else self.total + number

    def finalize(self) -> str | None:
        return None if self.total is None else str(self.total)


class SQLiteAdapter(EngineAdapter):
    dialect = "sqlite"
    upsert_style = "on_conflict"
    lock_style = "file"
    upsert_select_needs_where = True
    binds_temporal_as_text = True
    checksum_version = "v2"
    counts_distinct_tuples = False

    def failing_value(self, value: exp.Expr, kind: str) -> exp.Expr:
        """`json()` of marked text: "malformed JSON", where every CAST succeeds."""
        text = exp.Coalesce(this=exp.cast(value, "TEXT"), expressions=[exp.Literal.string("NULL")])
        return exp.Anonymous(
            this="JSON", expressions=[exp.DPipe(this=exp.Literal.string(OUTSIDE_MARK), expression=text)]
        )

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        if not getattr(engine, "_idem_sqlite_configured", False):
            event.listen(engine, "connect", self._on_connect)
            event.listen(engine, "begin", self._on_begin)
            engine._idem_sqlite_configured = True  # type: ignore[attr-defined]

    @classmethod
    def connect_args(cls, timeout: float) -> dict[str, Any]:
        """pysqlite's busy timeout: how long a statement waits for another writer's lock."""
        return {"timeout": timeout}

    def null_safe_distinct(self, left: exp.Expr, right: exp.Expr) -> exp.Expr:
        """`NOT (a IS b)`, i.e. `a IS NOT b`: SQLite's IS compares NULL as a value (every version)."""
        return exp.not_(exp.paren(exp.Is(this=left, expression=right)))

    def prepare_connection(self, conn: Connection) -> None:
        """Register the exact decimal SUM on this connection (used by `sum_measure`)."""
        conn.connection.driver_connection.create_aggregate(DECIMAL_SUM, 1, _DecimalSum)  # type: ignore[union-attr]

    def sum_measure(self, value: exp.Expr) -> exp.Expr:
        """An exact decimal sum (text), not SQLite's float SUM over REAL values."""
        return exp.Anonymous(this=DECIMAL_SUM, expressions=[value])

    def row_hash(self, text: exp.Expr) -> exp.Expr:
        """SQLite has no hash function: a 31-bit one is registered on every connection."""
        return exp.Anonymous(this=HASH_FUNCTION, expressions=[text])

    def row_checksum(self, columns: Sequence[ColumnInfo]) -> exp.Expr:
        """v2: the stored values passed to a registered function as they are (no text in SQL)."""
        return exp.Anonymous(this=ROW_HASH_FUNCTION, expressions=[self.column(c.name) for c in columns])

    @staticmethod
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        """Let SQLAlchemy, not pysqlite, open transactions; wait for other writers; add the hash."""
        dbapi_conn.isolation_level = None
        dbapi_conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        dbapi_conn.create_function(HASH_FUNCTION, 1, _hash31, deterministic=True)
        dbapi_conn.create_function(ROW_HASH_FUNCTION, -1, _row_hash31, deterministic=True)

    @staticmethod
    def _on_begin(conn: Any) -> None:
        """BEGIN IMMEDIATE takes SQLite's write lock up front, so DDL and DML are in the transaction."""
        conn.exec_driver_sql("BEGIN IMMEDIATE")

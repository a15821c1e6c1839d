"""PostgreSQL: ON CONFLICT upserts, advisory locks, local lock and statement timeouts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlglot import exp

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.adapters.locks import set_local_timeouts


class PostgresAdapter(EngineAdapter):
    dialect = "postgres"
    upsert_style = "on_conflict"
    lock_style = "advisory"

    def row_hash(self, text: exp.Expr) -> exp.Expr:
        return exp.Anonymous(this="hashtextextended", expressions=[text, exp.Literal.number(0)])

    @classmethod
    def connect_args(cls, timeout: float) -> dict[str, Any]:
        """connect_timeout, and a server-side statement_timeout for every statement of the session."""
        return {
            "connect_timeout": max(1, int(timeout)),
            "options": f"-c statement_timeout={int(timeout * 1000)}",
        }

    @classmethod
    @contextmanager
    def bounded_lock_wait(cls, conn: Connection | Session, timeout: float) -> Iterator[None]:
        """SET LOCAL lock_timeout and statement_timeout: this transaction only, then the pool's default."""
        set_local_timeouts(conn, int(timeout * 1000), statement=True)
        yield

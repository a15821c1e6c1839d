"""PostgreSQL: ON CONFLICT upserts and transaction-scoped advisory locks."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlglot import exp

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.window import Window


class PostgresAdapter(EngineAdapter):
    dialect = "postgres"
    upsert_style = "on_conflict"
    lock_style = "advisory_xact"

    def row_hash(self, text: exp.Expr) -> exp.Expr:
        return exp.Anonymous(this="hashtextextended", expressions=[text, exp.Literal.number(0)])

    def acquire_lock(self, conn: Connection, table: str, window: Window, timeout: float) -> None:
        """pg_advisory_xact_lock under a local lock_timeout: commit or rollback releases it."""
        ms = f"{max(1, int(timeout * 1000))}ms"
        conn.execute(sa.text("SELECT set_config('lock_timeout', :ms, true)"), {"ms": ms})
        try:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": self.lock_key(table, window)})
        except sa.exc.OperationalError as err:
            if getattr(err.orig, "pgcode", None) == "55P03":  # lock_not_available
                raise self.lock_timeout_error(table, window, timeout, "advisory lock held") from err
            raise
        conn.execute(sa.text("SELECT set_config('lock_timeout', '0', true)"))

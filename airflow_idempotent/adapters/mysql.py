"""MariaDB / MySQL: ON DUPLICATE KEY UPDATE upserts and GET_LOCK named locks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlglot import exp

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.window import Window


class MySQLAdapter(EngineAdapter):
    dialect = "mysql"
    upsert_style = "on_duplicate_key"
    lock_style = "get_lock"
    transactional_ddl = False
    drop_temporary_keyword = True
    update_join_style = "join"

    def on_conflict(self, keys: Sequence[str], updates: Sequence[str]) -> exp.OnConflict:
        """ON DUPLICATE KEY UPDATE c = VALUES(c): MariaDB's native upsert."""
        return exp.OnConflict(
            duplicate=True,
            action=exp.var("UPDATE"),
            expressions=[
                exp.EQ(
                    this=self.column(c), expression=exp.Anonymous(this="VALUES", expressions=[self.column(c)])
                )
                for c in updates
            ],
        )

    def null_safe_distinct(self, left: exp.Expr, right: exp.Expr) -> exp.Expr:
        """`NOT (a <=> b)`: MariaDB's NULL-safe equality, negated (it has no IS DISTINCT FROM)."""
        return exp.not_(exp.paren(exp.NullSafeEQ(this=left, expression=right)))

    def row_hash(self, text: exp.Expr) -> exp.Expr:
        """The first 60 bits of MD5 as an unsigned integer (MariaDB has no 64-bit text hash)."""
        prefix = exp.Substring(
            this=exp.MD5(this=text), start=exp.Literal.number(1), length=exp.Literal.number(15)
        )
        conv = exp.Anonymous(
            this="CONV", expressions=[prefix, exp.Literal.number(16), exp.Literal.number(10)]
        )
        return exp.cast(conv, exp.DataType.build("DECIMAL(20, 0)"))  # CONV returns text: SUM would be a float

    @contextmanager
    def locked_transaction(self, table: str, window: Window, timeout: float) -> Iterator[Connection]:
        """GET_LOCK belongs to the session, not the transaction: take it first, release it after commit."""
        name = self.lock_name(table, window)
        with self.engine.connect() as conn:
            got = conn.execute(
                sa.text("SELECT GET_LOCK(:name, :timeout)"), {"name": name, "timeout": timeout}
            ).scalar()
            conn.commit()
            if got != 1:
                raise self.lock_timeout_error(table, window, timeout, f"GET_LOCK {name} not granted")
            try:
                with conn.begin():
                    yield conn
            finally:
                conn.rollback()
                conn.execute(sa.text("SELECT RELEASE_LOCK(:name)"), {"name": name})
                conn.commit()

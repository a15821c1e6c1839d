"""DuckDB: ON CONFLICT upserts; one writer process per file, so a file lock beside it comes first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlglot import exp

from airflow_idempotent.adapters.base import (
    ColumnInfo,
    ColumnKind,
    EngineAdapter,
    TableInfo,
    missing_table,
    split_table_name,
)

_KINDS: dict[str, ColumnKind] = {
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_NS": "timestamp",
    "TIMESTAMP_MS": "timestamp",
    "TIMESTAMP_S": "timestamp",
    "TIMESTAMP WITH TIME ZONE": "timestamptz",
}


class DuckDBAdapter(EngineAdapter):
    dialect = "duckdb"
    upsert_style = "on_conflict"
    lock_style = "file"
    #: One writer process per file: a warehouse here, never the history store.
    hosts_history_store = False

    checksum_version = "v2"
    upsert_counts_distinct_rows = True

    def row_hash(self, text: exp.Expr) -> exp.Expr:
        return exp.Anonymous(this="hash", expressions=[text])

    def row_checksum(self, columns: Sequence[ColumnInfo]) -> exp.Expr:
        """v2: DuckDB's `hash(c1, .., cn)`, typed, NULL-aware and order-sensitive (7x the text form)."""
        return exp.Anonymous(this="hash", expressions=[self.column(c.name) for c in columns])

    def describe(self, conn: Connection, table: str) -> TableInfo:
        """Read DuckDB's own catalog: SQLAlchemy's PostgreSQL-style reflection fails on it.

        `duckdb_columns()`, not `information_schema.columns` (a view over it): 1.3 ms against 4.0 ms
        a call on a 4-column table, paid by every write.
        """
        schema, name = split_table_name(table)
        params: dict[str, Any] = {"name": name, "schema": schema or "main"}
        rows = conn.execute(
            sa.text(
                "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
                "WHERE table_name = :name AND schema_name = :schema ORDER BY column_index"
            ),
            params,
        ).all()
        if not rows:
            raise missing_table(table)
        columns = {
            str(r[0]).lower(): ColumnInfo(
                name=str(r[0]),
                type_name=str(r[1]),
                kind=_KINDS.get(str(r[1]).upper(), "other"),
                nullable=bool(r[2]),
            )
            for r in rows
        }
        keys = conn.execute(
            sa.text(
                "SELECT constraint_column_names FROM duckdb_constraints() WHERE table_name = :name "
                "AND schema_name = :schema AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')"
            ),
            params,
        ).all()
        unique = tuple(frozenset(str(c).lower() for c in r[0]) for r in keys)
        return TableInfo(schema=schema, name=name, columns=columns, unique_keys=unique)

"""One adapter per database; `adapter_for` picks it from the engine's dialect."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.adapters.duckdb import DuckDBAdapter
from airflow_idempotent.adapters.mysql import MySQLAdapter
from airflow_idempotent.adapters.postgres import PostgresAdapter
from airflow_idempotent.adapters.sqlite import SQLiteAdapter
from airflow_idempotent.errors import UnsupportedConnectionError

ADAPTERS: dict[str, type[EngineAdapter]] = {
    "postgresql": PostgresAdapter,
    "mysql": MySQLAdapter,
    "mariadb": MySQLAdapter,
    "sqlite": SQLiteAdapter,
    "duckdb": DuckDBAdapter,
}


def adapter_for(engine: Engine) -> EngineAdapter:
    """The adapter of the engine's database, or a clear error listing the supported ones."""
    cls = ADAPTERS.get(engine.dialect.name)
    if cls is None:
        raise UnsupportedConnectionError(
            f"no adapter for the {engine.dialect.name!r} database: supported are PostgreSQL, MariaDB/MySQL, "
            "SQLite and DuckDB. Point the operator's conn_id at one of those."
        )
    return cls(engine)


__all__ = [
    "ADAPTERS",
    "DuckDBAdapter",
    "EngineAdapter",
    "MySQLAdapter",
    "PostgresAdapter",
    "SQLiteAdapter",
    "adapter_for",
]

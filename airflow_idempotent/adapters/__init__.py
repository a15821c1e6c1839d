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


def adapter_class(dialect: str) -> type[EngineAdapter]:
    """The adapter class of a SQLAlchemy dialect (or backend) name, or a clear error.

    For what needs no engine of ours: connect arguments before an engine exists, and bounded
    lock waits on someone else's connection (Airflow's metadata database).
    """
    cls = ADAPTERS.get(dialect)
    if cls is None:
        raise UnsupportedConnectionError(
            f"no adapter for the {dialect!r} database: supported are PostgreSQL, MariaDB/MySQL, "
            "SQLite and DuckDB. Point the operator's conn_id at one of those."
        )
    return cls


def adapter_for(engine: Engine) -> EngineAdapter:
    """The adapter of the engine's database, or a clear error listing the supported ones."""
    return adapter_class(engine.dialect.name)(engine)


__all__ = [
    "ADAPTERS",
    "DuckDBAdapter",
    "EngineAdapter",
    "MySQLAdapter",
    "PostgresAdapter",
    "SQLiteAdapter",
    "adapter_class",
    "adapter_for",
]

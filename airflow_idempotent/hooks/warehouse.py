"""The warehouse hook: an Airflow connection turned into a SQLAlchemy engine and its adapter.

Task code may not use Airflow's ORM, so every write goes through an engine of our own,
built from the connection (PostgreSQL, MariaDB/MySQL, SQLite, DuckDB).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.providers.common.sql.hooks.sql import DbApiHook
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import NullPool

from airflow_idempotent.adapters import EngineAdapter, adapter_for
from airflow_idempotent.adapters.drivers import create_engine
from airflow_idempotent.errors import UnsupportedConnectionError

#: Airflow connection type -> SQLAlchemy driver name.
DRIVERS: dict[str, str] = {
    "postgres": "postgresql+psycopg2",
    "postgresql": "postgresql+psycopg2",
    "mysql": "mysql+pymysql",
    "mariadb": "mysql+pymysql",
    "sqlite": "sqlite",
    "duckdb": "duckdb",
}
EMBEDDED = {"sqlite", "duckdb"}


class WarehouseHook(DbApiHook):
    """Any supported database behind one hook, so operators need only a conn_id."""

    conn_name_attr = "conn_id"
    default_conn_name = "warehouse"
    conn_type = "generic"
    hook_name = "Idempotent warehouse"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

    @property
    def sqlalchemy_url(self) -> URL:
        conn = self.connection
        conn_type = (conn.conn_type or "").lower()
        driver = DRIVERS.get(conn_type)
        if driver is None:
            raise UnsupportedConnectionError(
                f"connection {self.get_conn_id()!r} has type {conn_type!r}: supported types are "
                f"{', '.join(sorted(DRIVERS))}. Recreate it with one of them."
            )
        if conn_type in EMBEDDED:
            path = conn.host or conn.schema
            if not path or not path.startswith("/"):
                raise UnsupportedConnectionError(
                    f"connection {self.get_conn_id()!r} ({conn_type}) needs the absolute path of the "
                    f'database file in host, e.g. {{"conn_type": "{conn_type}", '
                    '"host": "/data/warehouse.db"}.'
                )
            return URL.create(driver, database=path)
        return URL.create(
            driver,
            username=conn.login or None,
            password=conn.password or None,
            host=conn.host or None,
            port=conn.port or None,
            database=conn.schema or None,
        )

    @cached_property
    def engine(self) -> Engine:
        """One engine per hook; NullPool so no connection (or DuckDB file) outlives its use."""
        return create_engine(self.sqlalchemy_url, poolclass=NullPool)

    def get_sqlalchemy_engine(self, engine_kwargs: dict[str, Any] | None = None) -> Engine:
        return self.engine if not engine_kwargs else create_engine(self.sqlalchemy_url, **engine_kwargs)

    @cached_property
    def adapter(self) -> EngineAdapter:
        if (self.connection.conn_type or "").lower() == "spark_connect":
            from airflow_idempotent.spark.adapter import SparkAdapter  # needs the spark extra

            return SparkAdapter.from_connection(self.get_conn_id())
        return adapter_for(self.engine)

    def get_conn(self) -> Any:
        """A DB-API connection, for common-sql's run() (e.g. SQLExecuteQueryOperator)."""
        return self.engine.raw_connection()


class DuckDBWarehouseHook(WarehouseHook):
    """Registers the `duckdb` connection type, which no Airflow provider ships."""

    conn_type = "duckdb"
    hook_name = "DuckDB (airflow-idempotent)"
    default_conn_name = "duckdb_default"

"""PyMySQL's preferred TLS through one shared context: same settings, no CA store per connection."""

from __future__ import annotations

import ssl

import sqlalchemy as sa
from pymysql.connections import Connection
from sqlalchemy.pool import NullPool

from airflow_idempotent.adapters.drivers import (
    create_engine,
    preferred_tls_connection,
    preferred_tls_context,
)

SETTINGS = ("protocol", "verify_mode", "check_hostname", "verify_flags", "options", "minimum_version")


def test_the_shared_context_has_pymysqls_preferred_settings() -> None:
    """What PyMySQL builds for a connection given no TLS option, setting for setting."""
    own = Connection._create_ssl_ctx(None, {})  # PyMySQL's own preferred-mode context
    shared = preferred_tls_context()
    assert own.verify_mode == ssl.CERT_NONE  # so the CA store it loads is never read
    assert {s: getattr(shared, s) for s in SETTINGS} == {s: getattr(own, s) for s in SETTINGS}
    assert shared.cert_store_stats()["x509_ca"] == 0
    assert preferred_tls_context() is shared


def test_tls_options_still_build_pymysqls_own_context() -> None:
    cls = preferred_tls_connection()
    required = cls._create_ssl_ctx(cls.__new__(cls), {"check_hostname": False, "verify_mode": "required"})
    assert required is not preferred_tls_context()
    assert required.verify_mode == ssl.CERT_REQUIRED


def test_a_mariadb_engine_connects_through_the_shared_context(mariadb_url: str) -> None:
    engine = create_engine(mariadb_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
            raw = conn.connection.dbapi_connection
            assert isinstance(raw, preferred_tls_connection())
            assert raw.ctx is preferred_tls_context()  # TLS when the server offers it, as before
    finally:
        engine.dispose()


def test_other_engines_are_sqlalchemys_own() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        assert type(conn.connection.dbapi_connection).__module__ == "sqlite3"


def test_a_postgres_engine_skips_the_hstore_lookup(pg_url: str) -> None:
    engine = create_engine(pg_url, poolclass=NullPool)
    try:
        assert engine.dialect.use_native_hstore is False
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()

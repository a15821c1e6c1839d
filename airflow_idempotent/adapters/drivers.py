"""Engines of our own, with what their drivers cost per connection cut where it buys nothing.

PyMySQL (1.1+) opens every connection in "preferred" TLS: it builds a fresh `ssl` context that
loads the system's CA store (~25 ms here, two thirds of a MariaDB write's fixed cost) and then
turns verification off (`CERT_NONE`, no CA given), so the certificates it loaded are never read.
`PreferredTLSConnection` hands it one context of the same settings, built once and without the CA
store; TLS is still used when the server offers it, and a connection given TLS options (a CA,
a certificate, `ssl_disabled`) is built by PyMySQL itself, as before.

psycopg2 engines skip SQLAlchemy's HSTORE type lookup, a catalog query on every new connection
(a cold backend's first): no table of ours has an HSTORE column.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine


@functools.cache
def preferred_tls_context() -> ssl.SSLContext:
    """What PyMySQL's preferred mode builds for a connection without TLS options (no CA, so
    `CERT_NONE` and no host check; X.509 strict mode off for servers' self-signed certificates),
    minus the CA store it loads and never uses. Shared: an SSLContext serves many sockets."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


@functools.cache
def preferred_tls_connection() -> type[Any]:
    """PyMySQL's Connection, its preferred-mode context the shared one (imported when first used:
    PyMySQL is only there for MariaDB/MySQL connections)."""
    from pymysql.connections import Connection

    class PreferredTLSConnection(Connection):  # type: ignore[misc]
        def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
            if isinstance(sslp, dict) and not sslp:  # preferred mode: no TLS option was given
                return preferred_tls_context()
            return super()._create_ssl_ctx(sslp)  # type: ignore[no-any-return]

    return PreferredTLSConnection


def _connect_pymysql(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
    return preferred_tls_connection()(*cargs, **cparams)


def create_engine(url: URL | str, **kwargs: Any) -> Engine:
    """`sqlalchemy.create_engine`, a PyMySQL engine connecting through `PreferredTLSConnection`,
    a psycopg2 one without the HSTORE lookup."""
    if sa.make_url(url).get_driver_name() == "psycopg2":
        kwargs.setdefault("use_native_hstore", False)
    engine = sa.create_engine(url, **kwargs)
    if engine.dialect.driver == "pymysql":
        event.listen(engine, "do_connect", _connect_pymysql)
    return engine

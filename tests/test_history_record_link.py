"""A write's history record on the connection of its check before commit (`history.link`).

The check before commit (kill switch, fence) hands its store connection on to the record that
follows the warehouse's commit, so the record pays no pool checkout with its liveness ping. Read
from SQLAlchemy's pool events and the servers' own session ids; the record from the store.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from airflow_idempotent.examples.payouts import create_payouts, create_sales
from airflow_idempotent.history.spool import SafeHistory
from airflow_idempotent.operators import PartitionOverwriteOperator
from tests.test_operators import DAY, context, make


@pytest.fixture(params=["postgres", "mariadb"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A history store in a database of its own on the server, dropped after the test."""
    base = sa.make_url(request.getfixturevalue("pg_url" if request.param == "postgres" else "mariadb_url"))
    name = f"idem_link_{secrets.token_hex(4)}"
    admin = sa.create_engine(base.set(database="postgres" if request.param == "postgres" else None))
    quoted = f'"{name}"' if request.param == "postgres" else f"`{name}`"
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f"CREATE DATABASE {quoted}"))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        SafeHistory().store.engine.dispose()  # its pooled sessions, before the database goes
        force = " WITH (FORCE)" if request.param == "postgres" else ""
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {quoted}{force}"))
        admin.dispose()


@pytest.fixture
def write_to(tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DuckDB warehouse with the scenario's tables, and the store at `store_url`."""
    url = sa.make_url(store_url)
    kind = "postgres" if url.get_backend_name() == "postgresql" else "mysql"
    conn = {"conn_type": kind, "host": url.host, "port": url.port, "login": url.username}
    conn["schema"] = url.database
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps(conn))
    path = tmp_path / "warehouse.duckdb"
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", json.dumps({"conn_type": "duckdb", "host": str(path)}))
    engine = sa.create_engine(f"duckdb:///{path}", poolclass=NullPool)
    create_sales(engine)
    create_payouts(engine)
    engine.dispose()
    return path


def session_of(dbapi: Any) -> int:
    """The server's id of a DB-API connection's session (PostgreSQL backend pid, MariaDB thread)."""
    return int(dbapi.get_backend_pid() if hasattr(dbapi, "get_backend_pid") else dbapi.thread_id())


def test_the_record_is_stored_on_the_connection_of_the_check_before_commit(write_to: Path) -> None:
    store = SafeHistory().store
    store.migrate()  # the schema's own connections are not the write's
    checkouts: list[int] = []
    ran: list[tuple[int, str]] = []
    sa.event.listen(store.engine.pool, "checkout", lambda dbapi, *_: checkouts.append(session_of(dbapi)))

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        ran.append((session_of(conn.connection.dbapi_connection), statement.lstrip()[:40]))

    sa.event.listen(store.engine, "before_cursor_execute", seen)
    out = make("overwrite").execute(context(DAY, run_id="scheduled__link"))
    sa.event.remove(store.engine, "before_cursor_execute", seen)
    # the moment before writing, the check before commit; none of its own for the record
    assert len(checkouts) == 2, checkouts
    check_session = next(s for s, sql in reversed(ran) if "idem_fence" in sql and sql.startswith("SELECT"))
    record_session = next(s for s, sql in ran if sql.startswith("INSERT INTO idem_window_write"))
    assert record_session == check_session == checkouts[-1]
    (written,) = store.writes(run_id="scheduled__link")
    assert (written["status"], written["row_count"], written["ordinal"]) == ("written", 2000, 1)
    assert out["ordinal"] == 1


def test_a_dropped_connection_is_replaced_for_the_record(
    write_to: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server ends the store's session between the check before commit and the record (as an
    idle timeout or a restart would): the record is stored on a new connection, as the pool's
    liveness ping would have done, not spooled."""
    store = SafeHistory().store
    store.migrate()
    admin = sa.create_engine(store_url, poolclass=NullPool)
    database = sa.make_url(store_url).database
    real_write = PartitionOverwriteOperator.write

    def write_then_drop(self: Any, adapter: Any, spec: Any) -> Any:
        result = real_write(self, adapter, spec)  # committed: the record comes next
        with admin.connect() as conn:
            if admin.dialect.name == "postgresql":
                ended = conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :db AND pid <> pg_backend_pid()"
                    ),
                    {"db": database},
                ).all()
            else:
                ids = conn.execute(
                    sa.text(
                        "SELECT id FROM information_schema.PROCESSLIST "
                        "WHERE db = :db AND id <> CONNECTION_ID()"
                    ),
                    {"db": database},
                ).scalars()
                ended = [conn.execute(sa.text(f"KILL {int(i)}")) for i in list(ids)]
        assert ended, "the check before commit's session was open"
        return result

    monkeypatch.setattr(PartitionOverwriteOperator, "write", write_then_drop)
    out = make("overwrite").execute(context(DAY, run_id="scheduled__dropped"))
    admin.dispose()
    (written,) = store.writes(run_id="scheduled__dropped")
    assert (written["status"], written["row_count"]) == ("written", 2000)
    assert out["ordinal"] == 1
    assert not list((write_to.parent / "idempotent_spool").glob("*.jsonl"))


def test_the_record_continues_the_check_transaction_on_postgres_only(write_to: Path) -> None:
    """On PostgreSQL (READ COMMITTED: a snapshot per statement) the record continues the check
    before commit's read transaction: no ROLLBACK and BEGIN between the fence read and the record.
    On MariaDB (REPEATABLE READ) the check's transaction ends first, so the record's read of the
    earlier writes is not the check's snapshot."""
    store = SafeHistory().store
    store.migrate()
    events: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        events.append(" ".join(statement.split())[:40])

    hooks: list[tuple[str, Any]] = [("before_cursor_execute", seen)]
    hooks += [
        (name, lambda conn, *_, name=name: events.append(name.upper())) for name in ("begin", "rollback")
    ]
    for name, hook in hooks:
        sa.event.listen(store.engine, name, hook)
    make("overwrite").execute(context(DAY, run_id="scheduled__joined"))
    for name, hook in hooks:
        sa.event.remove(store.engine, name, hook)
    fence_read = max(i for i, e in enumerate(events) if e.startswith("SELECT idem_fence"))
    record = next(i for i, e in enumerate(events) if e.startswith("INSERT INTO idem_window_write"))
    between = [e for e in events[fence_read:record] if e in ("BEGIN", "ROLLBACK")]
    if store.engine.dialect.name == "postgresql":
        assert between == [], events[fence_read:record]
    else:
        assert between == ["ROLLBACK", "BEGIN"], events[fence_read:record]
    (written,) = store.writes(run_id="scheduled__joined")
    assert (written["status"], written["ordinal"]) == ("written", 1)

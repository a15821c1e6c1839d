"""The write's connection opened early (`adapters.early`): the write's transaction runs on the
connection opened before it, and one nobody takes is closed. Read from the servers' own session
lists (pg_stat_activity, MariaDB's PROCESSLIST), not from the adapter."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals
from airflow_idempotent.guard import killswitch
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.window import day_range
from tests.test_operators import context, make

DAY_DATE = dt.date(2026, 8, 24)
DAY = day_range(DAY_DATE, DAY_DATE)


def sessions(url: str) -> Callable[[], set[int]]:
    """The ids of the sessions connected to `url`'s database, as the server lists them (from a
    connection of its own, which is left out)."""
    admin = sa.create_engine(url, poolclass=NullPool)
    database = sa.make_url(url).database
    if admin.dialect.name == "postgresql":
        query = "SELECT pid FROM pg_stat_activity WHERE datname = :db AND pid <> pg_backend_pid()"
    else:
        query = "SELECT id FROM information_schema.PROCESSLIST WHERE db = :db AND id <> CONNECTION_ID()"

    def listed() -> set[int]:
        with admin.connect() as conn:
            return {int(v) for v in conn.execute(sa.text(query), {"db": database}).scalars()}

    return listed


def session_id(conn: sa.Connection) -> int:
    if conn.dialect.name == "postgresql":
        return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
    return int(conn.execute(sa.text("SELECT CONNECTION_ID()")).scalar_one())


def wait_for(listed: Callable[[], set[int]], ready: Callable[[set[int]], bool]) -> set[int]:
    deadline = time.monotonic() + 10
    while True:
        now = listed()
        if ready(now) or time.monotonic() > deadline:
            return now
        time.sleep(0.02)


@pytest.fixture(params=["postgres", "mariadb"])
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("pg_url" if request.param == "postgres" else "mariadb_url"))


def adapter_of(url: str) -> EngineAdapter:
    return adapter_for(sa.create_engine(url, poolclass=NullPool))


def test_the_locked_transaction_runs_on_the_connection_opened_early(url: str) -> None:
    listed = sessions(url)
    before = listed()
    adapter = adapter_of(url)
    adapter.open_early()
    opened = wait_for(listed, lambda now: len(now - before) == 1) - before
    assert len(opened) == 1, "open_early opened one session before any statement ran"
    with adapter.locked_transaction("payouts", DAY, 5) as conn:
        assert {session_id(conn)} == opened
    adapter.engine.dispose()
    assert wait_for(listed, lambda now: not now - before) - before == set()


def test_an_early_connection_nobody_takes_is_closed(url: str) -> None:
    listed = sessions(url)
    before = listed()
    adapter = adapter_of(url)
    adapter.open_early()
    assert len(wait_for(listed, lambda now: len(now - before) == 1) - before) == 1
    adapter.close_early()  # a write refused before its transaction (kill switch, fence)
    assert wait_for(listed, lambda now: not now - before) - before == set()
    with adapter.locked_transaction("payouts", DAY, 5) as conn:  # a connection of its own then
        assert session_id(conn) not in before


def test_embedded_files_are_not_opened_early(duckdb_url: str) -> None:
    adapter = adapter_of(duckdb_url)
    adapter.open_early()  # the file's lock comes before the database is opened
    assert adapter.early is None


def test_a_write_refused_before_its_transaction_leaves_no_session(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator opens the warehouse connection early; a kill switch refusing the write before
    its transaction closes it (the operator's `finally`), and nothing is written."""
    history_path = tmp_path / "history.db"
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(history_path)})
    )
    parts = sa.make_url(url)
    kind = "postgres" if parts.get_backend_name() == "postgresql" else "mysql"
    conn = {"conn_type": kind, "host": parts.host, "port": parts.port, "login": parts.username}
    monkeypatch.setenv("AIRFLOW_CONN_EARLY_WAREHOUSE", json.dumps({**conn, "schema": parts.database}))
    engine = sa.create_engine(url, poolclass=NullPool)
    with engine.begin() as c:
        c.execute(sa.text("DROP TABLE IF EXISTS payouts"))
        c.execute(sa.text("DROP TABLE IF EXISTS sales"))
    create_sales(engine)
    create_payouts(engine)
    listed = sessions(url)
    before = listed()
    killswitch.set_switch(HistoryStore(sa.create_engine(f"sqlite:///{history_path}")), "global", None, "stop")
    op = make("overwrite", conn_id="early_warehouse")
    with pytest.raises(killswitch.KillSwitchTripped, match="stop") as refused:
        op.execute(context(DAY_DATE, run_id="scheduled__early"))
    # closed by the operator, not by the garbage collector: the error's frames still hold the adapter
    assert wait_for(listed, lambda now: not now - before) - before == set()
    assert refused.traceback
    assert window_totals(engine, "payouts", DAY_DATE)[0] == 0
    engine.dispose()

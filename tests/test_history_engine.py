"""One history engine per store and timeout in a process, and none shared with a forked child.

A task process records its attempt through the listener and its write through the operator: one
engine serves both, so the second pays no connect. A forked child (a LocalExecutor worker, the
task runner) must not use or close the connections of its parent's engine.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_idempotent.history.spool import SafeHistory
from airflow_idempotent.history.store import history_engine


def _pg_conn(pg_url: str) -> str:
    url = sa.engine.make_url(pg_url)
    return json.dumps(
        {
            "conn_type": "postgres",
            "host": url.host,
            "port": url.port,
            "login": url.username,
            "schema": url.database,
        }
    )


def test_callers_share_one_engine_per_store_and_timeout(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", _pg_conn(pg_url))
    first, second = SafeHistory(timeout=3.5).store.engine, SafeHistory(timeout=3.5).store.engine
    assert first is second
    assert history_engine(timeout=4.5) is not first  # its connect and statement bounds differ


def test_at_most_four_engines_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", raising=False)
    engines = []
    for i in range(5):
        (tmp_path / str(i)).mkdir()
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / str(i)))
        engines.append(history_engine(timeout=7.25))
        with engines[-1].connect() as conn:  # a pooled connection to each SQLite file
            conn.execute(sa.text("SELECT 1"))
    assert engines[0].pool.checkedin() == 0  # the least recently used, disposed
    assert all(e.pool.checkedin() == 1 for e in engines[1:])
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "4"))
    assert history_engine(timeout=7.25) is engines[4]


def test_a_forked_child_leaves_its_parents_connection_alone(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", _pg_conn(pg_url))
    parent = history_engine(timeout=6.5)
    with parent.connect() as conn:
        backend = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
    pid = os.fork()
    if pid == 0:  # the child: its own engine, and a collection that would close inherited ones
        code = 1
        try:
            child = history_engine(timeout=6.5)
            code = 2 if child is parent else 3
            del parent  # the cache's reference to the inherited engine is the last one
            gc.collect()
            with child.connect() as conn:
                code = 0 if conn.execute(sa.text("SELECT 1")).scalar() == 1 else 4
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with parent.connect() as conn:  # the same server session: the child did not end it
        assert conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() == backend

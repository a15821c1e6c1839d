"""The (table, window) lock is the table's: on MariaDB, whose named locks are server-wide, a table
of the same name in another database is not blocked by it; the same table in the same database is
(through the default database or qualified)."""

from __future__ import annotations

import datetime as dt
import secrets
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.errors import LockTimeoutError
from airflow_idempotent.window import day_range
from tests.conftest import MARIADB_HOST, MARIADB_PORT, MARIADB_USER

DAY = day_range(dt.date(2026, 8, 24), dt.date(2026, 8, 24))


@pytest.fixture
def two_databases(mariadb_url: str) -> Iterator[tuple[str, str]]:
    """`mariadb_url` and a second database on the same server, each with a table `payouts`."""
    other = f"idem_lock_{secrets.token_hex(4)}"
    admin = sa.create_engine(f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/")
    with admin.begin() as conn:
        conn.execute(sa.text(f"CREATE DATABASE `{other}`"))
    second = f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/{other}"
    try:
        yield mariadb_url, second
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{other}`"))
        admin.dispose()


def test_mariadb_named_locks_are_per_database(two_databases: tuple[str, str]) -> None:
    first_url, second_url = two_databases
    first, second = sa.create_engine(first_url), sa.create_engine(second_url)
    a, b = adapter_for(first), adapter_for(second)
    database = first.url.database
    try:
        with a.locked_transaction("payouts", DAY, timeout=5):
            # Another database's `payouts`: granted at once.
            with b.locked_transaction("payouts", DAY, timeout=0.5):
                pass
            # The same table, by its default database or qualified, from either engine: it waits,
            # then times out.
            same = adapter_for(sa.create_engine(first_url))
            for adapter, table in (
                (same, "payouts"),
                (same, f"{database}.payouts"),
                (b, f"{database}.payouts"),
            ):
                with pytest.raises(LockTimeoutError), adapter.locked_transaction(table, DAY, timeout=0.5):
                    pass
    finally:
        first.dispose()
        second.dispose()


def test_mariadb_a_write_reads_what_committed_before_its_lock(mariadb_url: str) -> None:
    """GET_LOCK is the transaction's first statement (no COMMIT after it): the write waiting for
    the lock still reads the holder's committed change (InnoDB's snapshot is taken by the first
    read of a table, after the lock), and the lock is free again after the write, for a new
    connection, without a COMMIT after RELEASE_LOCK."""
    table = f"idem_snap_{secrets.token_hex(3)}"
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT)"))
        conn.execute(sa.text(f"INSERT INTO {table} VALUES (1, 0)"))
    holder, waiter = adapter_for(engine), adapter_for(sa.create_engine(mariadb_url))
    seen: list[int] = []
    asked = threading.Event()

    def wait_then_read() -> None:
        asked.set()
        with waiter.locked_transaction("payouts", DAY, timeout=10) as conn:
            seen.append(int(conn.execute(sa.text(f"SELECT v FROM {table} WHERE id = 1")).scalar_one()))

    try:
        with holder.locked_transaction("payouts", DAY, timeout=5) as conn:
            conn.execute(sa.text(f"UPDATE {table} SET v = 42 WHERE id = 1"))
            thread = threading.Thread(target=wait_then_read)
            thread.start()
            asked.wait(5)
            time.sleep(0.3)  # the waiter is in GET_LOCK, its transaction begun
            assert not seen
        thread.join(15)
        assert seen == [42]
        other = adapter_for(sa.create_engine(mariadb_url))
        with other.locked_transaction("payouts", DAY, timeout=0.5):
            pass
        other.engine.dispose()
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()
        waiter.engine.dispose()

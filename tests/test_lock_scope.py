"""The (table, window) lock is the table's: on MariaDB, whose named locks are server-wide, a table
of the same name in another database is not blocked by it; the same table in the same database is
(through the default database or qualified)."""

from __future__ import annotations

import datetime as dt
import secrets
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

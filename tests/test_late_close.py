"""An embedded file closed after its commit on a thread (`adapters.late`): the lock files stay held
until the file is closed, the operator waits for the close before it returns, and a close that
fails is raised. Read from the lock files themselves (flock from a descriptor of the test's own)."""

# ruff: noqa: F811  (the fixture imported from test_operators is a parameter here)

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from airflow_idempotent.adapters import adapter_for, locks
from airflow_idempotent.adapters.locks import LockId
from airflow_idempotent.examples.payouts import window_totals
from airflow_idempotent.window import day_range
from tests.test_operators import DAY, context, day_truth, loaded, make  # noqa: F401  (fixture)


def locked_elsewhere(path: Path) -> bool:
    """Whether another open file description holds `path`'s flock (this one then cannot take it)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases the flock if it was taken here
    return False


def test_a_released_transaction_holds_its_lock_until_the_stack_closes(tmp_path: Path) -> None:
    engine = sa.create_engine(f"duckdb:///{tmp_path / 'w.duckdb'}", poolclass=NullPool)
    lock = tmp_path / "w.lock"
    handed: list[contextlib.ExitStack] = []
    with locks.file_transaction(engine, [lock], 1, lambda: TimeoutError("held"), handed.append) as conn:
        conn.execute(sa.text("CREATE TABLE t AS SELECT 42 AS v"))
    assert len(handed) == 1, "the commit handed the close over"
    assert locked_elsewhere(lock), "the lock is held until the handed-over close runs"
    handed[0].close()
    assert not locked_elsewhere(lock)
    with engine.connect() as conn:  # committed before the hand-over
        assert conn.execute(sa.text("SELECT v FROM t")).scalar_one() == 42
    engine.dispose()


def test_a_failed_transaction_closes_in_line(tmp_path: Path) -> None:
    engine = sa.create_engine(f"duckdb:///{tmp_path / 'w.duckdb'}", poolclass=NullPool)
    lock = tmp_path / "w.lock"
    handed: list[contextlib.ExitStack] = []
    refused = lambda: TimeoutError("held")  # noqa: E731
    with (
        pytest.raises(sa.exc.DBAPIError),
        locks.file_transaction(engine, [lock], 1, refused, handed.append) as conn,
    ):
        conn.execute(sa.text("SELECT * FROM no_such_table"))
    assert handed == [] and not locked_elsewhere(lock)
    engine.dispose()


def test_only_slow_closing_files_close_late(tmp_path: Path) -> None:
    duck = adapter_for(sa.create_engine(f"duckdb:///{tmp_path / 'w.duckdb'}", poolclass=NullPool))
    lite = adapter_for(sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}", poolclass=NullPool))
    for adapter in (duck, lite):
        adapter.close_late()
    assert duck.late_release() is not None
    assert lite.late_release() is None


def test_settle_raises_what_the_close_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    adapter = adapter_for(sa.create_engine(f"duckdb:///{tmp_path / 'w.duckdb'}", poolclass=NullPool))

    def failing() -> None:
        raise OSError("disk full at the shutdown checkpoint")

    for quiet in (False, True):
        stack = contextlib.ExitStack()
        stack.callback(failing)
        adapter.close_in_background(stack)
        if quiet:
            with caplog.at_level(logging.WARNING, logger="airflow_idempotent.adapters.late"):
                adapter.settle_late(quiet=True)
            assert "disk full" in caplog.text
        else:
            with pytest.raises(OSError, match="disk full"):
                adapter.settle_late()
        assert adapter.closing is None


@pytest.mark.parametrize("warehouse", ["duckdb"], indirect=True)
@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_the_operator_returns_with_the_file_closed_and_unlocked(loaded: Any, strategy: str) -> None:
    """The write's close was handed to a thread (`late`), and the operator waited for it (no close
    pending): the lock file is free and the window holds the truth when execute() returns."""
    adapter = adapter_for(sa.create_engine(loaded.url, poolclass=NullPool))
    result = make(strategy).execute_with(context(), adapter)
    assert adapter.late and adapter.closing is None
    lock = adapter.lock_path(LockId.of(adapter.lock_resource("payouts", day_range(DAY, DAY))))
    assert lock.exists() and not locked_elsewhere(lock)
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)
    assert result["source_rows"] == 2000

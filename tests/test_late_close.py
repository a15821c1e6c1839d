"""An embedded file closed after its commit on a thread (`adapters.late`): the lock files stay held
until the file is closed, the operator waits for the close before it returns, and a close that
fails is raised. Read from the lock files themselves (flock from a descriptor of the test's own)."""

# ruff: noqa: F811  (the fixture imported from test_operators is a parameter here)

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
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


def test_only_slow_closing_files_close_late_and_only_inside_the_block(tmp_path: Path) -> None:
    duck = adapter_for(sa.create_engine(f"duckdb:///{tmp_path / 'w.duckdb'}", poolclass=NullPool))
    lite = adapter_for(sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}", poolclass=NullPool))
    assert duck.late_release() is None, "no hand-over before the block"
    with duck.closes_late(), lite.closes_late():
        assert duck.late_release() is not None
        assert lite.late_release() is None
    assert duck.late_release() is None, "nor after it"
    with pytest.raises(RuntimeError), duck.closes_late():
        raise RuntimeError("the write failed")
    assert duck.late_release() is None, "nor after a block that raised"


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


def test_the_block_raises_what_the_close_raised_and_logs_it_under_another_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = adapter_for(sa.create_engine(f"duckdb:///{tmp_path / 'w.duckdb'}", poolclass=NullPool))

    def failing() -> None:
        raise OSError("disk full at the shutdown checkpoint")

    def hand_over() -> None:
        stack = contextlib.ExitStack()
        stack.callback(failing)
        release = adapter.late_release()
        assert release is not None
        release(stack)

    with pytest.raises(OSError, match="disk full"), adapter.closes_late():
        hand_over()
    assert adapter.closing is None
    with (
        caplog.at_level(logging.WARNING, logger="airflow_idempotent.adapters.late"),
        pytest.raises(RuntimeError, match="the record failed"),
        adapter.closes_late(),
    ):
        hand_over()
        raise RuntimeError("the record failed")
    assert "disk full" in caplog.text and adapter.closing is None


@pytest.mark.parametrize("warehouse", ["duckdb"], indirect=True)
@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_the_operator_returns_with_the_file_closed_and_unlocked(loaded: Any, strategy: str) -> None:
    """The write's close was handed to a thread, and the operator waited for it: counted from the
    engine's own pool events, one of the warehouse's connections closed on a thread other than the
    test's, every connection opened was closed when execute() returns, and the lock file is free."""
    engine = sa.create_engine(loaded.url, poolclass=NullPool)
    opened: list[int] = []
    closed_on: list[int] = []
    sa.event.listen(engine, "connect", lambda *_: opened.append(threading.get_ident()))
    sa.event.listen(engine, "close", lambda *_: closed_on.append(threading.get_ident()))
    adapter = adapter_for(engine)
    result = make(strategy).execute_with(context(), adapter)
    here = threading.get_ident()
    handed_over = [t for t in closed_on if t != here]
    assert len(handed_over) == 1, f"{len(handed_over)} of {len(closed_on)} closes on another thread"
    assert len(closed_on) == len(opened), "a connection still open when execute() returned"
    assert adapter.late_release() is None, "no hand-over outlives the execute"
    lock = adapter.lock_path(LockId.of(adapter.lock_resource("payouts", day_range(DAY, DAY))))
    assert lock.exists() and not locked_elsewhere(lock)
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)
    assert result["source_rows"] == 2000

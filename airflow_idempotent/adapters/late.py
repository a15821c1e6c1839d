"""An embedded warehouse's file closed in the background while the task records its write.

Closing a DuckDB file runs its shutdown checkpoint: ~20 ms after a 100,000-row write, which the
write's history record (4 round trips to the store, 3-8 ms) waited for, though it needs only the
commit. Inside `closes_late`, the write's transaction hands the connection's close and its lock
files' release to a thread as soon as it has committed (`locks.file_transaction`); the lock files
stay held until the file is closed, so no other writer opens it sooner. Leaving the block waits
for that thread and raises what the close raised (`settle_late`), so the operator's execute, which
wraps the write and its record in it, returns with the file closed, and no hand-over outlives it.
The mirror of `adapters.early`, which opens a server's connection ahead of the write.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import ClassVar

log = logging.getLogger(__name__)


class ClosingThread:
    """A committed transaction's close (`stack`: the connection, then its lock files) on a thread."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.error: BaseException | None = None
        self._stack = stack
        self._thread = threading.Thread(target=self._close, name="idempotent-late-close")
        self._thread.start()

    def _close(self) -> None:
        try:
            self._stack.close()
        except BaseException as err:  # raised by `join`, in the task's own thread
            self.error = err

    def join(self) -> None:
        self._thread.join()
        error, self.error = self.error, None
        if error is not None:
            raise error


class LateClose:
    """The adapter's side (a part of `EngineAdapter`): close late when asked, then settle."""

    #: Whether closing the database is slow enough to overlap with the record (DuckDB's checkpoint).
    closes_slowly: ClassVar[bool] = False
    #: True inside `closes_late` (where `closes_slowly`): a committed file transaction closes on a thread.
    late: bool = False
    #: The thread closing the last committed transaction, until `settle_late`.
    closing: ClosingThread | None = None

    @contextlib.contextmanager
    def closes_late(self) -> Iterator[None]:
        """Within the block, this adapter's committed file transactions close in the background
        (only where `closes_slowly`; elsewhere the close stays in line). On exit the hand-over
        ends and the block waits for the close: its error is raised, or, when the block raised
        already, logged (`settle_late`)."""
        self.late = self.closes_slowly
        failed = True
        try:
            yield
            failed = False
        finally:
            self.late = False
            self.settle_late(quiet=failed)

    def late_release(self) -> Callable[[contextlib.ExitStack], None] | None:
        """What a file transaction hands its close to once committed: None closes it in line."""
        return self.close_in_background if self.late else None

    def close_in_background(self, stack: contextlib.ExitStack) -> None:
        """Start closing `stack` on a thread, after the previous close has finished."""
        self.settle_late()
        self.closing = ClosingThread(stack)

    def settle_late(self, quiet: bool = False) -> None:
        """Wait for the background close; raise its error, or with `quiet` (another error is on
        its way out already) log it."""
        closing, self.closing = self.closing, None
        if closing is None:
            return
        try:
            closing.join()
        except Exception as err:
            if not quiet:
                raise
            log.warning("closing the warehouse after its commit failed too: %s", err)

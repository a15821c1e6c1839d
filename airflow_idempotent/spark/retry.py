"""Retrying a table format's optimistic commit that lost a race, as a lock wait would wait.

Delta Lake and Iceberg both commit optimistically: a commit that finds another commit touched what
it read fails, and nothing of it is visible. Running the statement again (re-reading the table) is
then correct; doing so until the write's lock timeout gives the operator one bound for both a
lock wait and these retries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from airflow_idempotent.errors import LockTimeoutError

log = logging.getLogger(__name__)

T = TypeVar("T")


def retry_conflicts(run: Callable[[], T], conflicts: Sequence[str], what: str, timeout: float) -> T:
    """`run()`, again after a failure whose text names one of `conflicts` (a concurrent commit), with
    a growing pause, until `timeout` seconds have passed; then a LockTimeoutError naming the last
    conflict. Any other failure is raised at once."""
    deadline = time.monotonic() + timeout
    pause = 0.2
    while True:
        try:
            return run()
        except Exception as err:
            if not any(mark in str(err) for mark in conflicts):
                raise
            first = str(err).splitlines()[0]
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"{what} kept conflicting with concurrent commits for {timeout:g} s (last: {first}): "
                    "rerun the task, or raise lock_timeout."
                ) from err
            log.warning("%s conflicted with a concurrent one, retrying: %s", what, first)
            time.sleep(pause)
            pause = min(pause * 2, 5.0)

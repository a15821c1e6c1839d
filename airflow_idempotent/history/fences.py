"""Fencing: an attempt commits a window only if no newer attempt of its task instance started writing it.

The (table, window) lock keeps two attempts of one task instance apart, but it does not order
them: a zombie or a duplicate dispatch of try 1 can take the lock after try 2 committed and put
back what try 2 corrected (a new DAG version, a fixed policy). So every attempt, when it starts
writing a window, raises the window's fence (table ``idem_fence``, one row per task instance,
target and window) to its try number, and reads it again as the last step before its commit,
still holding the (table, window) lock. An attempt that finds a higher try number is fenced: it
writes nothing and fails without retry (`FencedError`).

Why that orders them: the newer attempt raises the fence before it waits for the lock, and the
older one reads the fence under the lock just before committing. If the newer one committed
first, the older one reads its number and is fenced; if the older one commits first, the newer
one then overwrites the window. Either way the window ends with the newer attempt's result.

The fence lives in the history store, where every attempt of the task instance (any worker, any
engine's warehouse) can see it. A store that cannot answer does not block a write (as for the
kill switch of a scheduled run): the attempt writes unfenced and says so in its log.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from airflow_idempotent.errors import FencedError
from airflow_idempotent.history.models import Fence
from airflow_idempotent.history.store import HistoryStore, utcnow
from airflow_idempotent.identity import AttemptIdentity
from airflow_idempotent.window import Window

log = logging.getLogger(__name__)

#: The write record's status of a fenced attempt.
FENCED = "fenced"


def _table() -> sa.Table:
    return Fence.__table__  # type: ignore[return-value]


def fence_key(identity: AttemptIdentity, target: str, window: Window) -> str:
    """The fence's natural key (task instance, target, window), hashed to fit any unique index."""
    parts = (identity.dag_id, identity.run_id, identity.task_id, str(identity.map_index), target)
    text = "\x1f".join((*parts, window.start.isoformat(), window.end.isoformat()))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class NewerAttempt:
    """The attempt that holds a window's fence above this one's try number."""

    try_number: int
    hostname: str | None
    pid: int | None
    started_at: datetime

    def describe(self) -> str:
        where = f" on {self.hostname}" if self.hostname else ""
        pid = f" (pid {self.pid})" if self.pid else ""
        at = f"{self.started_at:%Y-%m-%d %H:%M:%S} UTC"
        return f"try {self.try_number}, which started writing at {at}{where}{pid}"


def fenced_error(identity: AttemptIdentity, target: str, window: Window, newer: NewerAttempt) -> FencedError:
    return FencedError(
        f"fenced: try {identity.try_number} of {identity.dag_id}.{identity.task_id} (run {identity.run_id}) "
        f"did not write {target} window {window.label()}, because a newer attempt of the same task "
        f"instance, {newer.describe()}, is writing or has written it; committing now would put back an "
        "older result over the newer one. Nothing was written and this attempt is not retried. Nothing "
        "to do if the newer attempt succeeded (its write is in `airflow-idempotent history`); if it "
        "failed, clear the task to run a new try. Never mark this attempt success."
    )


def _rows(conn: sa.Connection, keys: Sequence[str]) -> dict[str, Any]:
    table = _table()
    query = sa.select(
        table.c.fence_key, table.c.try_number, table.c.hostname, table.c.pid, table.c.started_at
    )
    return {r.fence_key: r for r in conn.execute(query.where(table.c.fence_key.in_(list(keys)))).all()}


def _newer(row: Any) -> NewerAttempt:
    return NewerAttempt(int(row.try_number), row.hostname, row.pid, row.started_at)


def take(store: HistoryStore, identity: AttemptIdentity, target: str, windows: Sequence[Window]) -> None:
    """Raise each window's fence to this attempt's try number (one transaction, under the store's
    lock on the target's windows, so two attempts never both insert). FencedError, nothing
    changed, when a newer attempt holds one of them."""
    store.migrate()
    table = _table()
    keys = [fence_key(identity, target, w) for w in windows]
    now, host, pid = utcnow(), socket.gethostname()[:250], os.getpid()
    mine = {"try_number": identity.try_number, "hostname": host, "pid": pid, "started_at": now}
    with store.adapter.locked_transaction(f"fence:{target}", list(windows), store.timeout) as conn:
        rows = _rows(conn, keys)
        for key, window in zip(keys, windows, strict=True):
            row = rows.get(key)
            if row is not None and row.try_number > identity.try_number:
                raise fenced_error(identity, target, window, _newer(row))
        for key, window in zip(keys, windows, strict=True):
            row = rows.get(key)
            if row is None:
                conn.execute(
                    table.insert().values(
                        fence_key=key,
                        dag_id=identity.dag_id,
                        run_id=identity.run_id,
                        task_id=identity.task_id,
                        map_index=identity.map_index,
                        target=target,
                        window_start=window.start,
                        window_end=window.end,
                        **mine,
                    )
                )
            elif row.try_number < identity.try_number:
                conn.execute(table.update().where(table.c.fence_key == key).values(**mine))


def check(store: HistoryStore, identity: AttemptIdentity, target: str, windows: Sequence[Window]) -> None:
    """FencedError when a newer attempt raised one of the windows' fences since this one took them."""
    keys = [fence_key(identity, target, w) for w in windows]
    with store.engine.connect() as conn:
        rows = _rows(conn, keys)
    for key, window in zip(keys, windows, strict=True):
        row = rows.get(key)
        if row is not None and row.try_number > identity.try_number:
            raise fenced_error(identity, target, window, _newer(row))


def holder(store: HistoryStore, identity: AttemptIdentity, target: str, window: Window) -> int | None:
    """The try number holding the window's fence for this task instance (None: never taken)."""
    store.migrate()
    with store.engine.connect() as conn:
        row = _rows(conn, [fence_key(identity, target, window)]).get(fence_key(identity, target, window))
    return None if row is None else int(row.try_number)


@dataclass
class AttemptFence:
    """One attempt's fence on the windows it writes; a store that cannot answer leaves it unfenced."""

    store: HistoryStore | None
    identity: AttemptIdentity
    target: str
    windows: Sequence[Window]

    def take(self) -> None:
        self._guarded(take, "taken")

    def check(self) -> None:
        self._guarded(check, "checked")

    def _guarded(self, step: Any, what: str) -> None:
        if self.store is None:
            return
        try:
            step(self.store, self.identity, self.target, self.windows)
        except FencedError:
            raise
        except Exception as err:  # the history store must never block a write
            log.warning("fence not %s: history store unavailable (%s); writing unfenced", what, err)

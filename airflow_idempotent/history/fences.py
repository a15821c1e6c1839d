"""Fencing: an attempt commits a window only if no newer attempt of its task instance started writing it.

The (table, window) lock keeps two attempts of one task instance apart, but it does not order
them: a zombie or a duplicate dispatch of try 1 can take the lock after try 2 committed and put
back what try 2 corrected (a new DAG version, a fixed policy). So every attempt, when it starts
writing a window, raises the window's fence (table ``idem_fence``, one row per task instance,
target and window) to its try number, and reads it again as the last step before its commit,
still holding the (table, window) lock. An attempt that finds a higher try number is fenced: it
writes nothing and fails without retry (`FencedError`). Raising a fence takes no lock of its
own: the fence's unique key and a conditional UPDATE keep it rising (`take`).

Why that orders them: the newer attempt raises the fence before it waits for the lock, and the
older one reads the fence under the lock just before committing. If the newer one committed
first, the older one reads its number and is fenced; if the older one commits first, the newer
one then overwrites the window. Either way the window ends with the newer attempt's result.

The fence lives in the history store, where every attempt of the task instance (any worker, any
engine's warehouse) can see it. A store that cannot answer does not block a write (as for the
kill switch of a scheduled run): the attempt writes unfenced and says so in its log.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import random
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from airflow_idempotent.adapters.base import rowcount
from airflow_idempotent.errors import FencedError
from airflow_idempotent.history.link import StoreLink
from airflow_idempotent.history.models import Fence
from airflow_idempotent.history.store import HistoryStore, utcnow
from airflow_idempotent.identity import AttemptIdentity
from airflow_idempotent.window import Window

log = logging.getLogger(__name__)

#: The write record's status of a fenced attempt.
FENCED = "fenced"
#: How many times a take runs when the database picks it as a deadlock's victim (each after a
#: random pause, longer each time, so the attempts that met do not meet again).
DEADLOCK_RETRIES = 10


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


# The fence's statements, built once per process (a task calls take and check once each, on a
# fresh engine, where building a construct cost as much as its round trip). Values bound with the
# columns' types, so the UTC timestamps apply.
@functools.cache
def _newer_rows(keys: int) -> sa.Select[Any]:
    """The fences among `keys` keys held by a newer try than `:mine` (none: nothing fences this one)."""
    table = _table()
    names = [sa.bindparam(f"key_{n}", type_=table.c.fence_key.type) for n in range(keys)]
    mine = sa.bindparam("mine", type_=table.c.try_number.type)
    return sa.select(
        table.c.fence_key, table.c.try_number, table.c.hostname, table.c.pid, table.c.started_at
    ).where(table.c.fence_key.in_(names), table.c.try_number > mine)


@functools.cache
def _raise() -> sa.Update:
    """Raise one fence to `:mine` unless it is there already or higher: a conditional UPDATE, which
    waits for a concurrent one and re-reads the row, so the fence only ever rises."""
    table = _table()
    mine = sa.bindparam("mine", type_=table.c.try_number.type)
    return (
        table.update()
        .where(
            table.c.fence_key == sa.bindparam("key", type_=table.c.fence_key.type), table.c.try_number < mine
        )
        .values(
            try_number=mine,
            hostname=sa.bindparam("host", type_=table.c.hostname.type),
            pid=sa.bindparam("process", type_=table.c.pid.type),
            started_at=sa.bindparam("at", type_=table.c.started_at.type),
        )
    )


@functools.cache
def _holder() -> sa.Select[Any]:
    table = _table()
    return sa.select(table.c.try_number).where(
        table.c.fence_key == sa.bindparam("key", type_=table.c.fence_key.type)
    )


def _newer(conn: sa.Connection, keys: Sequence[str], try_number: int) -> dict[str, NewerAttempt]:
    """The newer attempts holding any of `keys`, by key (one SELECT)."""
    binds: dict[str, Any] = {f"key_{n}": key for n, key in enumerate(keys)}
    rows = conn.execute(_newer_rows(len(keys)), {**binds, "mine": try_number}).all()
    return {r.fence_key: NewerAttempt(int(r.try_number), r.hostname, r.pid, r.started_at) for r in rows}


def take(
    store: HistoryStore,
    identity: AttemptIdentity,
    target: str,
    windows: Sequence[Window],
    conn: sa.Connection | None = None,
) -> None:
    """Raise each window's fence to this attempt's try number, in one transaction; FencedError,
    nothing changed (rolled back), when a newer attempt holds one of them.

    No lock of its own: the fence's unique key decides. Per window, an insert-if-absent (a first
    attempt: one statement, then the commit); when the row is there, a conditional UPDATE raises
    it; when that changes nothing, a SELECT tells whether a newer try holds it (fenced) or this
    try already does. Two attempts inserting one fence at once: the second waits for the first's
    commit and then finds the row. A transaction the database picks as a deadlock's victim
    (MariaDB: two raises of one fence at once, each holding the shared lock its insert-if-absent
    took on the existing row) was rolled back whole, and runs again. On `conn` when given (a
    `history.link.StoreLink`'s, whose kill switch read may have begun the transaction this commits).
    """
    store.migrate()
    adapter = store.adapter
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            if conn is None:
                with store.engine.begin() as own:
                    _take(own, store, identity, target, windows)
            else:
                try:
                    _take(conn, store, identity, target, windows)
                    conn.commit()
                except BaseException:
                    conn.rollback()
                    raise
            return
        except sa.exc.DBAPIError as err:
            if attempt == DEADLOCK_RETRIES or not adapter.is_deadlock(err):
                raise
            pause = random.uniform(0.005, 0.05) * attempt  # apart, so they do not meet again
            log.info("fence take was a deadlock's victim (try %d of %d): again", attempt, DEADLOCK_RETRIES)
            time.sleep(pause)


def _take(
    conn: sa.Connection,
    store: HistoryStore,
    identity: AttemptIdentity,
    target: str,
    windows: Sequence[Window],
) -> None:
    """`take`'s statements, in the caller's transaction."""
    table, adapter = _table(), store.adapter
    now, host, pid = utcnow(), socket.gethostname()[:250], os.getpid()
    mine = {"try_number": identity.try_number, "hostname": host, "pid": pid, "started_at": now}
    raised = {"mine": identity.try_number, "host": host, "process": pid, "at": now}
    for window in windows:
        key = fence_key(identity, target, window)
        row = {
            "fence_key": key,
            "dag_id": identity.dag_id,
            "run_id": identity.run_id,
            "task_id": identity.task_id,
            "map_index": identity.map_index,
            "target": target,
            "window_start": window.start,
            "window_end": window.end,
            **mine,
        }
        if adapter.insert_if_absent(conn, table, row) > 0:
            continue
        if rowcount(conn.execute(_raise(), {**raised, "key": key})) > 0:
            continue
        newer = _newer(conn, [key], identity.try_number).get(key)
        if newer is not None:  # raising rolls back the windows raised before this one
            raise fenced_error(identity, target, window, newer)


def check(
    store: HistoryStore,
    identity: AttemptIdentity,
    target: str,
    windows: Sequence[Window],
    conn: sa.Connection | None = None,
) -> None:
    """FencedError when a newer attempt raised one of the windows' fences since this one took them
    (one SELECT, which returns no row unless a newer attempt holds a fence); on `conn` when given."""
    keys = [fence_key(identity, target, w) for w in windows]
    if conn is not None:
        newer = _newer(conn, keys, identity.try_number)
    else:
        with store.engine.connect() as own:
            newer = _newer(own, keys, identity.try_number)
    for key, window in zip(keys, windows, strict=True):
        if key in newer:
            raise fenced_error(identity, target, window, newer[key])


def holder(store: HistoryStore, identity: AttemptIdentity, target: str, window: Window) -> int | None:
    """The try number holding the window's fence for this task instance (None: never taken)."""
    store.migrate()
    with store.engine.connect() as conn:
        held = conn.execute(_holder(), {"key": fence_key(identity, target, window)}).scalar()
    return None if held is None else int(held)


@dataclass
class AttemptFence:
    """One attempt's fence on the windows it writes; a store that cannot answer leaves it unfenced.

    `link`, when set, is the moment's connection the kill switch check shares (`history.link`):
    the caller sets it around the take and the check before commit."""

    store: HistoryStore | None
    identity: AttemptIdentity
    target: str
    windows: Sequence[Window]
    link: StoreLink | None = None

    def take(self) -> None:
        self._guarded(take, "taken")

    def check(self) -> None:
        self._guarded(check, "checked")

    def _guarded(self, step: Any, what: str) -> None:
        if self.store is None:
            return
        try:
            conn = self.link.connection() if self.link is not None else None
            step(self.store, self.identity, self.target, self.windows, conn)
        except FencedError:
            raise
        except Exception as err:  # the history store must never block a write
            if self.link is not None:
                self.link.discard()
            log.warning("fence not %s: history store unavailable (%s); writing unfenced", what, err)

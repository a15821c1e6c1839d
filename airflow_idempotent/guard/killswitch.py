"""The kill switch: one flag that stops every remaining guarded write at once.

Stored in the history store (table idem_kill_switch) so every worker, the scheduler and the UI
see the same switch. Scopes: global, a DAG, or a DAG's backfill (a DAG runs one backfill at a
time). Guarded writes check it before writing and again just before commit.
"""

from __future__ import annotations

import functools
import getpass
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa

from airflow_idempotent.errors import IdempotentError
from airflow_idempotent.history.models import KillSwitch
from airflow_idempotent.history.store import HistoryStore, utcnow

Scope = Literal["global", "dag", "backfill"]
SCOPES: tuple[Scope, ...] = ("global", "dag", "backfill")
GLOBAL_KEY = "*"


class KillSwitchTripped(IdempotentError):
    """A kill switch covering this write is on: nothing is written."""


@dataclass(frozen=True)
class Switch:
    scope: str
    scope_key: str
    reason: str | None
    set_by: str | None
    set_at: Any

    def describe(self) -> str:
        where = "all DAGs" if self.scope == "global" else f"{self.scope} {self.scope_key}"
        reason = self.reason or "no reason given"
        return f"kill switch on {where} (set by {self.set_by} at {self.set_at}: {reason})"


def _table() -> sa.Table:
    return KillSwitch.__table__  # type: ignore[return-value]


def set_switch(
    store: HistoryStore, scope: Scope, key: str | None, reason: str, by: str | None = None
) -> Switch:
    """Turn a switch on (idempotent: setting it twice keeps one row, with the latest reason)."""
    scope_key = _key(scope, key)
    store.migrate()
    table = _table()
    values = {
        "active": True,
        "reason": reason,
        "set_by": by or _who(),
        "set_at": utcnow(),
        "cleared_by": None,
        "cleared_at": None,
    }
    with store.engine.begin() as conn:
        updated = conn.execute(
            table.update().where(table.c.scope == scope, table.c.scope_key == scope_key).values(**values)
        ).rowcount
        if not updated:
            conn.execute(table.insert().values(scope=scope, scope_key=scope_key, **values))
    return Switch(scope, scope_key, reason, str(values["set_by"]), values["set_at"])


def clear_switch(store: HistoryStore, scope: Scope, key: str | None, by: str | None = None) -> bool:
    """Turn a switch off; True if it was on."""
    scope_key = _key(scope, key)
    store.migrate()
    table = _table()
    with store.engine.begin() as conn:
        return bool(
            conn.execute(
                table.update()
                .where(table.c.scope == scope, table.c.scope_key == scope_key, table.c.active.is_(True))
                .values(active=False, cleared_by=by or _who(), cleared_at=utcnow())
            ).rowcount
        )


@functools.cache
def _covering(dag: bool, backfill: bool) -> sa.TextualSelect:
    """The active switches covering a write (of a DAG, in a backfill), oldest first, as one text
    per shape: every write checks twice on a fresh engine, where a select construct's compile
    cost ~0.6 ms each time. Values bound; the columns typed (set_at read as aware UTC)."""
    table = _table()
    covers = [f"(scope = 'global' AND scope_key = '{GLOBAL_KEY}')"]
    if dag:
        covers.append("(scope = 'dag' AND scope_key = :dag_id)")
        if backfill:
            covers.append("(scope = 'backfill' AND scope_key = :dag_id)")
    elif backfill:
        covers.append("scope = 'backfill'")
    names = ("scope", "scope_key", "reason", "set_by", "set_at")
    return sa.text(
        f"SELECT {', '.join(names)} FROM {table.name} WHERE active = :active AND ({' OR '.join(covers)}) "
        "ORDER BY set_at"
    ).columns(*(sa.column(n, table.c[n].type) for n in names))


def active_switches(
    store: HistoryStore, dag_id: str | None = None, backfill: bool = False, conn: sa.Connection | None = None
) -> list[Switch]:
    """The switches that cover a write of `dag_id` (in a backfill run if `backfill`); on `conn` when
    given (a `history.link.StoreLink`'s, shared with the fence), else on a connection of its own."""
    binds: dict[str, Any] = {"active": True} | ({"dag_id": dag_id} if dag_id is not None else {})
    if conn is not None:
        rows = conn.execute(_covering(dag_id is not None, backfill), binds).all()
    else:
        store.migrate()
        with store.engine.connect() as own:
            rows = own.execute(_covering(dag_id is not None, backfill), binds).all()
    return [Switch(r.scope, r.scope_key, r.reason, r.set_by, r.set_at) for r in rows]


def check(
    store: HistoryStore,
    dag_id: str | None,
    backfill: bool,
    when: str,
    set_before: datetime | None = None,
    conn: sa.Connection | None = None,
) -> None:
    """Raise KillSwitchTripped if any switch covers this write; `when` says which check it is.

    With `set_before` (a person's approval of this window), only switches set before that moment
    count: a decision stands against a stop that came after it.
    """
    switches = active_switches(store, dag_id, backfill, conn)
    if set_before is not None:
        switches = [s for s in switches if s.set_at is None or s.set_at < set_before]
    if switches:
        raise KillSwitchTripped(
            f"{when}: {'; '.join(s.describe() for s in switches)}. Nothing was written. Clear it with "
            f"`airflow-idempotent resume {_resume_args(switches[0])}` once the cause is fixed."
        )


def _resume_args(switch: Switch) -> str:
    if switch.scope == "global":
        return "--all"
    return f"--dag {switch.scope_key}" + (" --backfill" if switch.scope == "backfill" else "")


def _key(scope: Scope, key: str | None) -> str:
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if scope == "global":
        return GLOBAL_KEY
    if not key:
        raise ValueError(f"a {scope} kill switch needs a DAG id")
    return key


def _who() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"

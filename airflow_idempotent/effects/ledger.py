"""The effect ledger: one row per external effect identity, in the history store.

What an identity is and its keys: `effects.identity`; the row's states and transitions:
`effects.entry`; the tables: `history.models` (EffectRecord, EffectEvent). Every write here is
its own committed transaction, and every state change is guarded by the row's ``attempt``
counter, so an attempt that lost its claim can never overwrite a newer attempt's state.

A ``pending`` row whose attempt is gone (the call may or may not have gone out) is never sent
again silently: it is reconciled through a lookup by idempotency key, or a human decides
(``airflow-idempotent effects resolve``).

Liveness: the attempt that claims a row holds an *owner lock* on its identity from before the
claim until after the outcome is committed: the store adapter's session lock (PostgreSQL
``pg_try_advisory_lock``, MariaDB ``GET_LOCK``, a ``flock`` beside an embedded database file).
The database or the kernel releases it when the process dies, so "pending, lock free" means the
attempt that claimed it is gone, and "pending, lock held" means it is still working.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from functools import cached_property
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from airflow_idempotent.adapters import EngineAdapter, adapter_for
from airflow_idempotent.effects.entry import COMPENSATED, DONE, FAILED, PENDING, EffectEntry, State
from airflow_idempotent.effects.errors import EffectBusyError, EffectError
from airflow_idempotent.effects.identity import KEY_PREFIX, Claimant, EffectIdentity, idempotency_key
from airflow_idempotent.errors import LockTimeoutError
from airflow_idempotent.history.models import EffectEvent, EffectRecord
from airflow_idempotent.history.store import DEFAULT_CONN_ID, HistoryStore, history_engine, utcnow
from airflow_idempotent.window import to_utc_datetime

#: Seconds the ledger waits for the store (connect, and one statement on PostgreSQL).
LEDGER_TIMEOUT = 10.0
#: Prefix of the owner locks' names (MariaDB GET_LOCK, lock files).
OWNER_LOCK_PREFIX = "idem_eff_"

_E: sa.Table = EffectRecord.__table__  # type: ignore[assignment]
_EV: sa.Table = EffectEvent.__table__  # type: ignore[assignment]


def _json(value: Mapping[str, Any] | None) -> str | None:
    return None if not value else json.dumps(value, sort_keys=True, default=str)


# ----------------------------------------------------------------------------------- the ledger
class Ledger:
    """The effect ledger on the history store's engine. Every write is its own committed transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @cached_property
    def adapter(self) -> EngineAdapter:
        """The store database's adapter: it owns the owner lock."""
        return adapter_for(self.engine)

    @classmethod
    def from_airflow(cls, conn_id: str = DEFAULT_CONN_ID, timeout: float = LEDGER_TIMEOUT) -> Ledger:
        """The ledger in the history store of `conn_id` (or the embedded SQLite file)."""
        return cls(history_engine(conn_id, timeout))

    def migrate(self) -> None:
        """Bring the history store to the latest revision (it creates the ledger tables)."""
        HistoryStore(self.engine).migrate()

    # ------------------------------------------------------------------ reading
    def get(self, identity_key: str) -> EffectEntry | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(_E).where(_E.c.identity_key == identity_key)).first()
        return EffectEntry.from_row(row._mapping) if row is not None else None

    def find(self, key: str) -> EffectEntry | None:
        """The row whose identity key or idempotency key (of any generation) is `key`."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(_E).where(sa.or_(_E.c.identity_key == key, _E.c.idempotency_key == key))
            ).first()
            if row is None and key.startswith(KEY_PREFIX) and "-g" in key:
                row = conn.execute(sa.select(_E).where(_E.c.identity_key == key.rsplit("-g", 1)[0])).first()
        return EffectEntry.from_row(row._mapping) if row is not None else None

    def entries(
        self,
        *,
        dag_id: str | None = None,
        task_id: str | None = None,
        effect_name: str | None = None,
        state: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int | None = None,
    ) -> list[EffectEntry]:
        """Rows matching the filters (windows overlapping [start, end)), newest window first."""
        clauses: list[Any] = []
        for column, value in (
            (_E.c.dag_id, dag_id),
            (_E.c.task_id, task_id),
            (_E.c.effect_name, effect_name),
            (_E.c.state, state),
        ):
            if value is not None:
                clauses.append(column == value)
        if start is not None:
            clauses.append(_E.c.window_end > start)
        if end is not None:
            clauses.append(_E.c.window_start < end)
        query = (
            sa.select(_E)
            .where(*clauses)
            .order_by(_E.c.window_start.desc(), _E.c.window_end.desc(), _E.c.dag_id, _E.c.task_id, _E.c.id)
        )
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [EffectEntry.from_row(r._mapping) for r in rows]

    def events(self, identity_key: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(_EV).where(_EV.c.identity_key == identity_key).order_by(_EV.c.id)
            ).all()
        return [dict(r._mapping) for r in rows]

    # ------------------------------------------------------------------ writing
    def claim_new(
        self,
        identity: EffectIdentity,
        claimant: Claimant,
        *,
        state: State = PENDING,
        decision: str | None = None,
    ) -> bool:
        """Insert the row if absent, in its own committed transaction; False when it already exists."""
        now = utcnow()
        values = {
            "identity_key": identity.key,
            "idempotency_key": identity.idempotency_key(1),
            "dag_id": identity.dag_id,
            "task_id": identity.task_id,
            "window_start": to_utc_datetime(identity.window_start, "window start"),
            "window_end": to_utc_datetime(identity.window_end, "window end"),
            "window_label": identity.window_label,
            "effect_name": identity.effect_name,
            "business_key": identity.business_key,
            "identity": identity.canonical(),
            "state": state,
            "generation": 1,
            "attempt": 1,
            "resend_requested": False,
            "decision": decision,
            "claimed_at": now,
            "created_at": now,
            "updated_at": now,
            **self._claimant_values(claimant),
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(_E.insert().values(**values))
                self._event(
                    conn,
                    identity.key,
                    "claimed" if state == PENDING else state,
                    state,
                    1,
                    1,
                    claimant,
                    detail=decision,
                )
        except sa.exc.IntegrityError:
            return False
        return True

    def reclaim(
        self,
        entry: EffectEntry,
        claimant: Claimant,
        *,
        generation: int | None = None,
        resolution: str | None = None,
        decision: str | None = None,
    ) -> EffectEntry | None:
        """Take an existing row back to pending for this attempt (attempt + 1), committed before the call.

        A new generation gets a new idempotency key and keeps the old one in `previous`.
        None when the row changed since it was read (another attempt or a human got there first).
        """
        generation = entry.generation if generation is None else generation
        now = utcnow()
        values: dict[str, Any] = {
            "state": PENDING,
            "attempt": entry.attempt + 1,
            "generation": generation,
            "idempotency_key": idempotency_key(entry.identity_key, generation),
            "claimed_at": now,
            "finished_at": None,
            "error": None,
            "resend_requested": False,
            "resolution": resolution,
            "updated_at": now,
            **self._claimant_values(claimant),
        }
        if decision is not None:
            values["decision"] = decision
        if generation != entry.generation:
            earlier = entry.previous_generations
            earlier.append(
                {
                    "generation": entry.generation,
                    "idempotency_key": entry.idempotency_key,
                    "state": entry.state,
                    "reference": entry.reference,
                    "run_id": entry.run_id,
                    "finished_at": entry.finished_at.isoformat() if entry.finished_at else None,
                }
            )
            values.update(previous=json.dumps(earlier), reference=None, result=None)
        detail = "; ".join(x for x in (resolution, decision) if x) or None
        with self.engine.begin() as conn:
            if not self._compare_and_set(conn, entry, entry.state, values):
                return None
            self._event(
                conn,
                entry.identity_key,
                "reclaimed",
                PENDING,
                generation,
                entry.attempt + 1,
                claimant,
                detail,
            )
        return self.get(entry.identity_key)

    def finish(
        self,
        entry: EffectEntry,
        state: State,
        *,
        claimant: Claimant | None = None,
        reference: str | None = None,
        details: Mapping[str, Any] | None = None,
        error: str | None = None,
        resolution: str | None = None,
        event: str | None = None,
        actor: str | None = None,
    ) -> bool:
        """Move a pending row (still at `entry.attempt`) to done or failed, committed. False if it changed."""
        now = utcnow()
        values: dict[str, Any] = {"state": state, "finished_at": now, "updated_at": now, "error": error}
        if state == DONE:
            values.update(reference=reference, result=_json(details))
        if resolution is not None:
            values["resolution"] = resolution
        with self.engine.begin() as conn:
            if not self._compare_and_set(conn, entry, PENDING, values):
                return False
            detail = resolution or error or (f"reference {reference}" if reference else None)
            self._event(
                conn,
                entry.identity_key,
                event or state,
                state,
                entry.generation,
                entry.attempt,
                claimant,
                detail,
                actor=actor,
            )
        return True

    def note_error(self, entry: EffectEntry, claimant: Claimant, error: str) -> None:
        """The call raised and its outcome is unknown: the row stays pending, with the error."""
        now = utcnow()
        with self.engine.begin() as conn:
            self._compare_and_set(conn, entry, PENDING, {"error": error, "updated_at": now})
            self._event(
                conn, entry.identity_key, "error", PENDING, entry.generation, entry.attempt, claimant, error
            )

    def record_decision(
        self, entry: EffectEntry, claimant: Claimant, decision: str, event: str = "decision"
    ) -> None:
        """Write a declared rerun's decision on the row (and in the event trail); the state is unchanged."""
        with self.engine.begin() as conn:
            conn.execute(
                _E.update()
                .where(_E.c.identity_key == entry.identity_key)
                .values(decision=decision, updated_at=utcnow())
            )
            self._unchanged_event(conn, entry, event, claimant, decision)

    def log_event(
        self, entry: EffectEntry, claimant: Claimant | None, event: str, detail: str | None
    ) -> None:
        """An event that changes nothing (a skipped retry): the trail shows every attempt that came by."""
        with self.engine.begin() as conn:
            self._unchanged_event(conn, entry, event, claimant, detail)

    def resolve(
        self,
        entry: EffectEntry,
        as_: Literal["done", "failed", "resend", "compensated"],
        *,
        actor: str,
        reference: str | None = None,
        reason: str | None = None,
    ) -> EffectEntry:
        """A human's decision on a row (effects resolve). Raises EffectError when it does not apply."""
        allowed: dict[str, tuple[str, ...]] = {
            "done": (PENDING, FAILED),
            "failed": (PENDING,),
            "resend": (PENDING,),
            "compensated": (DONE,),
        }
        if entry.state not in allowed[as_]:
            raise EffectError(
                f"{entry.idempotency_key} is {entry.state}: --as {as_} applies to "
                f"{' or '.join(allowed[as_])} effects only"
            )
        why = f" ({reason})" if reason else ""
        now = utcnow()
        resolution = {
            "done": f"resolved by {actor}: it went out{why}",
            "failed": f"resolved by {actor}: it did not go out, the next attempt sends it{why}",
            "resend": f"resolved by {actor}: resend with the same idempotency key{why}",
            "compensated": f"resolved by {actor}: compensated (undone at the target){why}",
        }[as_]
        values: dict[str, Any] = {"resolution": resolution, "updated_at": now}
        if as_ == "done":
            values.update(state=DONE, finished_at=now, error=None)
            if reference is not None:
                values["reference"] = reference
        elif as_ == "failed":
            values.update(state=FAILED, finished_at=now)
        elif as_ == "resend":
            values.update(resend_requested=True)
        else:
            values.update(state=COMPENSATED)
            if reference is not None:
                values["result"] = _json({**entry.details, "compensation": reference})
        with self.engine.begin() as conn:
            if not self._compare_and_set(conn, entry, entry.state, values):
                raise EffectError(
                    f"{entry.idempotency_key} changed while resolving it: read it again and retry"
                )
            self._event(
                conn,
                entry.identity_key,
                "resolved",
                values.get("state", entry.state),
                entry.generation,
                entry.attempt,
                None,
                resolution + (f"; reference {reference}" if reference else ""),
                actor=actor,
            )
        resolved = self.get(entry.identity_key)
        assert resolved is not None
        return resolved

    @staticmethod
    def _compare_and_set(conn: Connection, entry: EffectEntry, state: str, values: dict[str, Any]) -> bool:
        """Update the row only if it is still at `entry.attempt` in `state` (optimistic concurrency:
        another attempt that moved it first wins, and this caller learns it from the False)."""
        changed = conn.execute(
            _E.update()
            .where(
                _E.c.identity_key == entry.identity_key,
                _E.c.attempt == entry.attempt,
                _E.c.state == state,
            )
            .values(**values)
        ).rowcount
        return bool(changed == 1)

    @staticmethod
    def _claimant_values(claimant: Claimant) -> dict[str, Any]:
        return {
            "run_id": claimant.run_id,
            "map_index": claimant.map_index,
            "try_number": claimant.try_number,
            "run_type": claimant.run_type,
            "semantics": claimant.semantics,
            "hostname": claimant.hostname,
            "pid": claimant.pid,
        }

    @staticmethod
    def _unchanged_event(
        conn: Connection, entry: EffectEntry, event: str, claimant: Claimant | None, detail: str | None
    ) -> None:
        """An event that leaves the row's state, generation and attempt as `entry` has them."""
        Ledger._event(
            conn, entry.identity_key, event, entry.state, entry.generation, entry.attempt, claimant, detail
        )

    @staticmethod
    def _event(
        conn: Connection,
        identity_key: str,
        event: str,
        state: str,
        generation: int,
        attempt: int,
        claimant: Claimant | None,
        detail: str | None = None,
        actor: str | None = None,
    ) -> None:
        conn.execute(
            _EV.insert().values(
                identity_key=identity_key,
                at=utcnow(),
                event=event,
                state=state,
                generation=generation,
                attempt=attempt,
                run_id=claimant.run_id if claimant else None,
                try_number=claimant.try_number if claimant else None,
                hostname=claimant.hostname if claimant else socket.gethostname(),
                pid=claimant.pid if claimant else os.getpid(),
                actor=actor,
                detail=detail,
            )
        )

    # ------------------------------------------------------------------ the owner lock
    @contextlib.contextmanager
    def owner_lock(self, identity_key: str, wait: float) -> Iterator[None]:
        """Hold the identity's owner lock, waiting at most `wait` seconds; EffectBusyError after that.

        Session-level (the adapter's `session_lock`), so it lasts across the claim, the call and the
        outcome's commit, and the database (or the kernel, for a lock file) drops it when the
        process dies.
        """
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self.adapter.session_lock(identity_key, wait, prefix=OWNER_LOCK_PREFIX))
            except LockTimeoutError:
                raise EffectBusyError(f"the owner lock of {identity_key} was held for {wait:g} s") from None
            yield


# ----------------------------------------------------------------------------------- for displays
def effects_for_windows(
    engine: Engine,
    windows: Iterable[tuple[datetime, datetime]],
    dag_ids: Iterable[str] | None = None,
) -> dict[tuple[datetime, datetime], list[dict[str, Any]]]:
    """Effects of each exact window (UTC bounds), optionally only of some DAGs, for history displays.

    One statement; windows are keys as given (converted to UTC); rows are plain dicts in the order
    dag, task, effect, business key. A store without the ledger table answers with no effects.
    """
    wanted = {(to_utc_datetime(s, "window start"), to_utc_datetime(e, "window end")) for s, e in windows}
    out: dict[tuple[datetime, datetime], list[dict[str, Any]]] = {w: [] for w in wanted}
    if not wanted:
        return out
    clauses: list[Any] = [sa.or_(*(sa.and_(_E.c.window_start == s, _E.c.window_end == e) for s, e in wanted))]
    dags = list(dag_ids or [])
    if dags:
        clauses.append(_E.c.dag_id.in_(dags))
    query = (
        sa.select(_E)
        .where(*clauses)
        .order_by(_E.c.dag_id, _E.c.task_id, _E.c.effect_name, _E.c.business_key, _E.c.id)
    )
    try:
        with engine.connect() as conn:
            rows = conn.execute(query).all()
    except sa.exc.ProgrammingError:  # pragma: no cover (a store older than revision 0002)
        return out
    except sa.exc.OperationalError as err:  # SQLite: no such table
        if "no such table" in str(err):
            return out
        raise
    for row in rows:
        entry = EffectEntry.from_row(row._mapping)
        out.setdefault((entry.window_start, entry.window_end), []).append(entry.as_dict())
    return out

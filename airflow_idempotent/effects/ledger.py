"""The effect ledger: one row per external effect identity, in the history store.

An effect (a payment request, an email, a bank file) is identified by (DAG, task, window, effect
name, business key). Its idempotency key is a stable hash of that identity, ``idem-<sha256 hex>``;
a declared re-send (a corrective backfill with ``resend_effects``) is a new *generation* of the
same row and gets the key ``idem-<hex>-g<n>``, so a target that deduplicates on keys sees a new
request.

States and transitions (every state change is an UPDATE guarded by the row's ``attempt`` counter,
so an attempt that lost its claim can never overwrite a newer attempt's state)::

    (absent)  -> pending      claim: INSERT, committed in its own transaction BEFORE the call
    (absent)  -> suppressed   a corrective backfill or replay that does not re-send effects
    pending   -> done         the call went out; the target's reference is recorded (or a
                              reconciliation found it at the target by its idempotency key)
    pending   -> failed       the call certainly did not take effect (refused, never reached)
    pending   -> pending      reclaimed: the target says absent, or a human decided to resend
    failed, suppressed -> pending   a later attempt sends it (it never happened: no duplicate)
    done, compensated  -> pending   only a corrective backfill with resend_effects=true
                                    (generation + 1, new idempotency key)
    done      -> compensated  by a human: the effect was undone outside (refund, recall)

A ``pending`` row whose attempt is gone (the call may or may not have gone out) is never sent
again silently: it is reconciled through a lookup by idempotency key, or a human decides
(``airflow-idempotent effects resolve``).

Liveness: the attempt that claims a row holds an *owner lock* on its identity from before the
claim until after the outcome is committed: a session-level advisory lock (PostgreSQL
``pg_try_advisory_lock``, MariaDB ``GET_LOCK``) or a ``flock`` beside an embedded database file.
The database or the kernel releases it when the process dies, so "pending, lock free" means the
attempt that claimed it is gone, and "pending, lock held" means it is still working.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any, Literal

import sqlalchemy as sa
from airflow.sdk.exceptions import AirflowException
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Mapped, mapped_column

from airflow_idempotent.errors import IdempotentError, LockTimeoutError
from airflow_idempotent.history.models import Base, UTCDateTime
from airflow_idempotent.history.store import DEFAULT_CONN_ID, HistoryStore, history_engine, utcnow
from airflow_idempotent.window import Window

log = logging.getLogger(__name__)

State = Literal["pending", "done", "failed", "compensated", "suppressed"]
PENDING: State = "pending"
DONE: State = "done"
FAILED: State = "failed"
COMPENSATED: State = "compensated"
SUPPRESSED: State = "suppressed"
STATES: tuple[State, ...] = (PENDING, DONE, FAILED, COMPENSATED, SUPPRESSED)

KEY_PREFIX = "idem-"
#: Seconds the ledger waits for the store (connect, and one statement on PostgreSQL).
LEDGER_TIMEOUT = 10.0
_POLL_FIRST = 0.02
_POLL_MAX = 0.25


# ----------------------------------------------------------------------------------- errors
class EffectError(IdempotentError):
    """An effect cannot be performed as declared (a fail: retrying cannot help)."""


class EffectPendingError(EffectError):
    """An earlier attempt claimed the effect and ended without recording whether it went out.

    The target cannot be asked by idempotency key, so a human decides: a fail, never retried.
    """


class EffectBusyError(AirflowException):
    """Another live attempt holds the effect past the wait: retryable, it will be done or failed."""


class EffectLedgerError(AirflowException):
    """The ledger cannot be read or written: retryable, and nothing was sent by this attempt."""


class EffectNotPerformed(Exception):
    """Raised by an effect when the call certainly did not take effect (refused or never sent).

    The ledger row becomes ``failed``; a later attempt may send it, which is not a duplicate.
    Any other exception during the call leaves the row ``pending`` (outcome unknown).
    """


# ----------------------------------------------------------------------------------- tables
class EffectRecord(Base):
    """One external effect identity and where it stands (see the module's state machine)."""

    __tablename__ = "idem_effect"
    __table_args__ = (
        sa.UniqueConstraint("identity_key"),
        sa.Index("ix_idem_effect_idempotency_key", "idempotency_key", unique=True),
        sa.Index("ix_idem_effect_window", "window_start", "window_end"),
        sa.Index("ix_idem_effect_dag", "dag_id", "task_id"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    #: idem-<sha256 of the identity>: unique, so exactly one attempt's claim inserts the row
    identity_key: Mapped[str] = mapped_column(sa.String(80))
    #: the key the target sees: the identity key, or <identity key>-g<n> for generation n > 1
    idempotency_key: Mapped[str] = mapped_column(sa.String(100))
    dag_id: Mapped[str] = mapped_column(sa.String(250))
    task_id: Mapped[str] = mapped_column(sa.String(250))
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    window_label: Mapped[str] = mapped_column(sa.String(120))
    effect_name: Mapped[str] = mapped_column(sa.String(250))
    business_key: Mapped[str | None] = mapped_column(sa.Text)
    #: the canonical JSON the identity key hashes
    identity: Mapped[str] = mapped_column(sa.Text)
    state: Mapped[str] = mapped_column(sa.String(16))
    generation: Mapped[int] = mapped_column(sa.Integer)
    #: how many times an attempt claimed the row; every state change compares it
    attempt: Mapped[int] = mapped_column(sa.Integer)
    # the attempt that made the latest claim
    run_id: Mapped[str] = mapped_column(sa.String(250))
    map_index: Mapped[int] = mapped_column(sa.Integer)
    try_number: Mapped[int] = mapped_column(sa.Integer)
    run_type: Mapped[str | None] = mapped_column(sa.String(32))
    semantics: Mapped[str | None] = mapped_column(sa.String(32))
    hostname: Mapped[str | None] = mapped_column(sa.String(250))
    pid: Mapped[int | None] = mapped_column(sa.Integer)
    claimed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: the target's reference for a done effect (payment id, Message-ID, file path and digest)
    reference: Mapped[str | None] = mapped_column(sa.Text)
    result: Mapped[str | None] = mapped_column(sa.Text)  # JSON details of the call
    error: Mapped[str | None] = mapped_column(sa.Text)
    #: how the latest pending state was settled (reconciled, resolved by a human, resend)
    resolution: Mapped[str | None] = mapped_column(sa.Text)
    #: a declared rerun's decision about this effect (corrective backfill, replay)
    decision: Mapped[str | None] = mapped_column(sa.Text)
    #: a human asked (effects resolve --as resend) that the next attempt sends a pending effect
    resend_requested: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    #: JSON list of earlier generations: idempotency key, reference, finished_at
    previous: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class EffectEvent(Base):
    """Every transition and decision of an effect, appended, never updated: the audit trail."""

    __tablename__ = "idem_effect_event"
    __table_args__ = (sa.Index("ix_idem_effect_event_identity", "identity_key", "id"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    identity_key: Mapped[str] = mapped_column(sa.String(80))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    #: claimed, reclaimed, done, failed, error, reconciled, skipped, suppressed, decision, resolved
    event: Mapped[str] = mapped_column(sa.String(32))
    state: Mapped[str] = mapped_column(sa.String(16))
    generation: Mapped[int] = mapped_column(sa.Integer)
    attempt: Mapped[int] = mapped_column(sa.Integer)
    run_id: Mapped[str | None] = mapped_column(sa.String(250))
    try_number: Mapped[int | None] = mapped_column(sa.Integer)
    hostname: Mapped[str | None] = mapped_column(sa.String(250))
    pid: Mapped[int | None] = mapped_column(sa.Integer)
    #: who, for a human's decision (effects resolve)
    actor: Mapped[str | None] = mapped_column(sa.String(250))
    detail: Mapped[str | None] = mapped_column(sa.Text)


_E: sa.Table = EffectRecord.__table__  # type: ignore[assignment]
_EV: sa.Table = EffectEvent.__table__  # type: ignore[assignment]


# ----------------------------------------------------------------------------------- identity
def canonical_business_key(key: Any) -> str | None:
    """A business key as stable text: strings as they are, anything else as sorted JSON."""
    if key is None or isinstance(key, str):
        return key
    return json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class EffectIdentity:
    """What makes two attempts "the same effect": never the run, the try or the clock."""

    dag_id: str
    task_id: str
    window_start: datetime
    window_end: datetime
    window_label: str
    effect_name: str
    business_key: str | None = None

    @classmethod
    def of(
        cls, dag_id: str, task_id: str, window: Window, effect_name: str, key: Any = None
    ) -> EffectIdentity:
        if not effect_name or not str(effect_name).strip():
            raise EffectError("an effect needs a name, e.g. once('payout-file', key=...)")
        return cls(
            dag_id=dag_id,
            task_id=task_id,
            window_start=window.start,
            window_end=window.end,
            window_label=window.label(),
            effect_name=str(effect_name),
            business_key=canonical_business_key(key),
        )

    def canonical(self) -> str:
        """The JSON the key hashes: window bounds as UTC ISO 8601, so the zone read in is irrelevant."""
        return json.dumps(
            {
                "dag_id": self.dag_id,
                "task_id": self.task_id,
                "window": [_utc(self.window_start).isoformat(), _utc(self.window_end).isoformat()],
                "effect": self.effect_name,
                "key": self.business_key,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @property
    def key(self) -> str:
        """``idem-<sha256 hex of the canonical identity>``: stable across runs, tries and hosts."""
        return KEY_PREFIX + hashlib.sha256(self.canonical().encode()).hexdigest()

    def idempotency_key(self, generation: int = 1) -> str:
        return idempotency_key(self.key, generation)

    def describe(self) -> str:
        key = "" if self.business_key is None else f", business key {self.business_key!r}"
        return (
            f"effect {self.effect_name!r} of {self.dag_id}.{self.task_id} for window {self.window_label}{key}"
        )


def idempotency_key(identity_key: str, generation: int) -> str:
    """The key the target sees for one generation of an identity."""
    return identity_key if generation <= 1 else f"{identity_key}-g{generation}"


@dataclass(frozen=True)
class Claimant:
    """The attempt claiming an effect: recorded on the row, so a human can find it."""

    run_id: str
    try_number: int
    map_index: int = -1
    run_type: str | None = None
    semantics: str | None = None
    hostname: str | None = None
    pid: int | None = None

    @classmethod
    def here(cls, **values: Any) -> Claimant:
        return cls(hostname=socket.gethostname(), pid=os.getpid(), **values)

    def describe(self) -> str:
        return f"run {self.run_id} try {self.try_number} (host {self.hostname}, pid {self.pid})"


@dataclass(frozen=True)
class EffectEntry:
    """One ledger row as plain data (datetimes timezone-aware UTC)."""

    id: int
    identity_key: str
    idempotency_key: str
    dag_id: str
    task_id: str
    window_start: datetime
    window_end: datetime
    window_label: str
    effect_name: str
    business_key: str | None
    identity: str
    state: str
    generation: int
    attempt: int
    run_id: str
    map_index: int
    try_number: int
    run_type: str | None
    semantics: str | None
    hostname: str | None
    pid: int | None
    claimed_at: datetime
    finished_at: datetime | None
    reference: str | None
    result: str | None
    error: str | None
    resolution: str | None
    decision: str | None
    resend_requested: bool
    previous: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> EffectEntry:
        values = {f.name: row[f.name] for f in fields(cls)}
        for name in ("window_start", "window_end", "claimed_at", "finished_at", "created_at", "updated_at"):
            values[name] = _utc(values[name])
        values["resend_requested"] = bool(values["resend_requested"])
        return cls(**values)

    @property
    def details(self) -> dict[str, Any]:
        return json.loads(self.result) if self.result else {}

    @property
    def previous_generations(self) -> list[dict[str, Any]]:
        return json.loads(self.previous) if self.previous else []

    def window(self) -> Window:
        import pendulum

        return Window(
            start=pendulum.instance(self.window_start),
            end=pendulum.instance(self.window_end),
            source="ledger",
        )

    def owner(self) -> str:
        return f"run {self.run_id} try {self.try_number} (host {self.hostname}, pid {self.pid})"

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["result"] = self.details
        out["previous"] = self.previous_generations
        return out


def _utc(value: Any) -> Any:
    """Naive datetimes from the store are UTC; aware ones are converted (pendulum to plain)."""
    if not isinstance(value, datetime):
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    converted = value.astimezone(timezone.utc)
    return datetime(*converted.timetuple()[:6], converted.microsecond, tzinfo=timezone.utc)


def _json(value: Mapping[str, Any] | None) -> str | None:
    return None if not value else json.dumps(value, sort_keys=True, default=str)


# ----------------------------------------------------------------------------------- the ledger
class Ledger:
    """The effect ledger on the history store's engine. Every write is its own committed transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

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
        return [{k: _utc(v) for k, v in r._mapping.items()} for r in rows]

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
            "window_start": _utc(identity.window_start),
            "window_end": _utc(identity.window_end),
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
            changed = conn.execute(
                _E.update()
                .where(
                    _E.c.identity_key == entry.identity_key,
                    _E.c.attempt == entry.attempt,
                    _E.c.state == entry.state,
                )
                .values(**values)
            ).rowcount
            if changed != 1:
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
            changed = conn.execute(
                _E.update()
                .where(
                    _E.c.identity_key == entry.identity_key,
                    _E.c.attempt == entry.attempt,
                    _E.c.state == PENDING,
                )
                .values(**values)
            ).rowcount
            if changed != 1:
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
            conn.execute(
                _E.update()
                .where(
                    _E.c.identity_key == entry.identity_key,
                    _E.c.attempt == entry.attempt,
                    _E.c.state == PENDING,
                )
                .values(error=error, updated_at=now)
            )
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
            self._event(
                conn,
                entry.identity_key,
                event,
                entry.state,
                entry.generation,
                entry.attempt,
                claimant,
                decision,
            )

    def log_event(
        self, entry: EffectEntry, claimant: Claimant | None, event: str, detail: str | None
    ) -> None:
        """An event that changes nothing (a skipped retry): the trail shows every attempt that came by."""
        with self.engine.begin() as conn:
            self._event(
                conn,
                entry.identity_key,
                event,
                entry.state,
                entry.generation,
                entry.attempt,
                claimant,
                detail,
            )

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
            changed = conn.execute(
                _E.update()
                .where(
                    _E.c.identity_key == entry.identity_key,
                    _E.c.attempt == entry.attempt,
                    _E.c.state == entry.state,
                )
                .values(**values)
            ).rowcount
            if changed != 1:
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
    def owner_lock(self, identity_key: str, window: Window, wait: float) -> Iterator[None]:
        """Hold the identity's owner lock, waiting at most `wait` seconds; EffectBusyError after that.

        Session-level, so it lasts across the claim, the call and the outcome's commit, and the
        database (or the kernel, for a lock file) drops it when the process dies.
        """
        digest = hashlib.sha256(identity_key.encode()).digest()
        dialect = self.engine.dialect.name
        if dialect in ("sqlite", "duckdb"):
            from airflow_idempotent.adapters import adapter_for
            from airflow_idempotent.adapters.embedded import EmbeddedAdapter

            adapter = adapter_for(self.engine)
            assert isinstance(adapter, EmbeddedAdapter)
            with contextlib.ExitStack() as stack:
                try:
                    stack.enter_context(adapter.file_lock(f"effect:{identity_key}", window, wait))
                except LockTimeoutError:
                    raise EffectBusyError(
                        f"the owner lock of {identity_key} was held for {wait:g} s"
                    ) from None
                yield
            return
        if dialect == "postgresql":
            acquire, release = "SELECT pg_try_advisory_lock(:k)", "SELECT pg_advisory_unlock(:k)"
            params: dict[str, Any] = {"k": int.from_bytes(digest[:8], "big", signed=True)}
        elif dialect in ("mysql", "mariadb"):
            acquire, release = "SELECT GET_LOCK(:k, 0)", "SELECT RELEASE_LOCK(:k)"
            params = {"k": "idem_eff_" + digest.hex()[:40]}
        else:
            raise EffectError(
                f"the effect ledger cannot lock on a {dialect!r} history store: use PostgreSQL, "
                "MariaDB/MySQL or SQLite for the connection idempotent_history"
            )
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            deadline = time.monotonic() + wait
            pause = _POLL_FIRST
            while conn.execute(sa.text(acquire), params).scalar() not in (1, True):
                if time.monotonic() >= deadline:
                    raise EffectBusyError(f"the owner lock of {identity_key} was held for {wait:g} s")
                time.sleep(pause)
                pause = min(pause * 2, _POLL_MAX)
            try:
                yield
            finally:
                with contextlib.suppress(sa.exc.SQLAlchemyError):  # a dead connection released it already
                    conn.execute(sa.text(release), params)

    def owner_alive(self, entry: EffectEntry) -> bool:
        """True when a live attempt holds the row's owner lock right now (for the CLI)."""
        try:
            with self.owner_lock(entry.identity_key, entry.window(), 0):
                return False
        except EffectBusyError:
            return True


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
    wanted = {(_utc(s), _utc(e)) for s, e in windows}
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

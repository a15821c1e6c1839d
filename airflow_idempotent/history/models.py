"""The history store's tables (SQLAlchemy 2). Schema changes go through the Alembic migrations
in `migrations/`; these definitions are what the latest migration creates.

Every record carries its natural key, enforced unique, so a record delivered twice (from the
spool after an outage) is stored once.
"""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from airflow_idempotent.window import to_utc_datetime

VERSION_TABLE = "idem_alembic_version"
#: The latest migration's revision: a store at it needs no Alembic run (see `HistoryStore.migrate`).
#: A test keeps it equal to the head of `migrations/versions`.
HEAD_REVISION = "0009"


class Base(DeclarativeBase):
    metadata = sa.MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


def column_length(model: type[Base], column: str) -> int | None:
    """The declared length of a string column (None for other types and unknown columns)."""
    columns = model.__table__.c
    return getattr(columns[column].type, "length", None) if column in columns else None


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Timestamps stored and read as UTC everywhere, SQLite included (it keeps no offset)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        """The package's one UTC rule (naive = UTC), then naive UTC for the databases keeping no offset."""
        if value is None:
            return None
        utc = to_utc_datetime(value, "timestamp")
        return utc.replace(tzinfo=None) if dialect.name in ("sqlite", "mysql") else utc

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        """Aware UTC from what the driver returns (naive UTC from SQLite and MariaDB).

        Its own conversion, not `window.to_utc_datetime`: it runs for every timestamp of every row
        read, and a driver only ever returns a stdlib datetime (naive here means UTC, as stored).
        """
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class DagRunEvent(Base):
    """A DAG run changing state (running, success, failed), as the scheduler saw it."""

    __tablename__ = "idem_dag_run_event"
    __table_args__ = (sa.UniqueConstraint("dag_id", "run_id", "event", "at"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    dag_id: Mapped[str] = mapped_column(sa.String(250), index=True)
    run_id: Mapped[str] = mapped_column(sa.String(250))
    event: Mapped[str] = mapped_column(sa.String(32))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str | None] = mapped_column(sa.String(32))
    run_type: Mapped[str | None] = mapped_column(sa.String(32))
    logical_date: Mapped[datetime | None] = mapped_column(UTCDateTime())
    data_interval_start: Mapped[datetime | None] = mapped_column(UTCDateTime())
    data_interval_end: Mapped[datetime | None] = mapped_column(UTCDateTime())
    semantics: Mapped[str | None] = mapped_column(sa.String(32))
    policy_version: Mapped[str | None] = mapped_column(sa.String(64))
    source: Mapped[str | None] = mapped_column(sa.String(32))
    message: Mapped[str | None] = mapped_column(sa.Text)


class TaskAttempt(Base):
    """One event of one task attempt: running, success, failed, up_for_retry, or a user's mark."""

    __tablename__ = "idem_task_attempt"
    __table_args__ = (
        sa.UniqueConstraint("dag_id", "run_id", "task_id", "map_index", "try_number", "event"),
        sa.Index("ix_idem_task_attempt_dag_task", "dag_id", "task_id"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    dag_id: Mapped[str] = mapped_column(sa.String(250))
    run_id: Mapped[str] = mapped_column(sa.String(250))
    task_id: Mapped[str] = mapped_column(sa.String(250))
    map_index: Mapped[int] = mapped_column(sa.Integer, default=-1)
    try_number: Mapped[int] = mapped_column(sa.Integer)
    event: Mapped[str] = mapped_column(sa.String(32))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str | None] = mapped_column(sa.String(32))
    previous_state: Mapped[str | None] = mapped_column(sa.String(32))
    run_type: Mapped[str | None] = mapped_column(sa.String(32))
    logical_date: Mapped[datetime | None] = mapped_column(UTCDateTime())
    hostname: Mapped[str | None] = mapped_column(sa.String(250))
    source: Mapped[str | None] = mapped_column(sa.String(32))
    error: Mapped[str | None] = mapped_column(sa.Text)


class WindowWrite(Base):
    """One write (or skip, or refusal) of one window of one table by one task attempt."""

    __tablename__ = "idem_window_write"
    __table_args__ = (
        # one record per attempt and period: a write with lookback records each covered period
        sa.UniqueConstraint("dag_id", "run_id", "task_id", "map_index", "try_number", "window_start"),
        sa.Index("ix_idem_window_write_target", "target", "window_start", "window_end"),
        sa.Index("ix_idem_window_write_dag", "dag_id", "task_id"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    dag_id: Mapped[str] = mapped_column(sa.String(250))
    run_id: Mapped[str] = mapped_column(sa.String(250))
    task_id: Mapped[str] = mapped_column(sa.String(250))
    map_index: Mapped[int] = mapped_column(sa.Integer, default=-1)
    try_number: Mapped[int] = mapped_column(sa.Integer)
    #: conn_id:table, so the same table name in two warehouses is two targets
    target: Mapped[str] = mapped_column(sa.String(500))
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    window_label: Mapped[str] = mapped_column(sa.String(120))
    strategy: Mapped[str] = mapped_column(sa.String(32))
    status: Mapped[str] = mapped_column(sa.String(32))  # written | skipped | refused
    rows_deleted: Mapped[int | None] = mapped_column(sa.BigInteger)
    rows_inserted: Mapped[int | None] = mapped_column(sa.BigInteger)
    rows_updated: Mapped[int | None] = mapped_column(sa.BigInteger)
    source_rows: Mapped[int | None] = mapped_column(sa.BigInteger)
    row_count: Mapped[int | None] = mapped_column(sa.BigInteger)
    checksum: Mapped[str | None] = mapped_column(sa.String(128))
    fingerprint: Mapped[str] = mapped_column(sa.String(64))
    fingerprint_parts: Mapped[str | None] = mapped_column(sa.Text)  # JSON
    run_type: Mapped[str | None] = mapped_column(sa.String(32))
    semantics: Mapped[str | None] = mapped_column(sa.String(32))
    policy_version: Mapped[str | None] = mapped_column(sa.String(64))
    ordinal: Mapped[int] = mapped_column(sa.Integer)
    dataset_version: Mapped[int] = mapped_column(sa.Integer)
    nondeterministic: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    diff: Mapped[str | None] = mapped_column(sa.Text)  # JSON, from guarded writes
    message: Mapped[str | None] = mapped_column(sa.Text)
    written_at: Mapped[datetime] = mapped_column(UTCDateTime())
    package_version: Mapped[str] = mapped_column(sa.String(32))
    # which code wrote it (`identity.CodeIdentity`): Airflow's DAG version and the DAG bundle
    dag_version_id: Mapped[str | None] = mapped_column(sa.String(36))
    dag_version_number: Mapped[int | None] = mapped_column(sa.Integer)
    bundle_name: Mapped[str | None] = mapped_column(sa.String(250))
    bundle_version: Mapped[str | None] = mapped_column(sa.String(250))


class KillSwitch(Base):
    """A stop that every guarded write checks before it writes and again before it commits.

    scope: "global" (key "*"), "dag" (key dag_id), or "backfill" (key dag_id: the one backfill
    a DAG may run at a time). Set by `airflow-idempotent stop`, a guard breach, or the UI.
    """

    __tablename__ = "idem_kill_switch"
    __table_args__ = (sa.UniqueConstraint("scope", "scope_key"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(sa.String(16))
    scope_key: Mapped[str] = mapped_column(sa.String(250))
    active: Mapped[bool] = mapped_column(sa.Boolean)
    reason: Mapped[str | None] = mapped_column(sa.Text)
    set_by: Mapped[str | None] = mapped_column(sa.String(250))
    set_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    cleared_by: Mapped[str | None] = mapped_column(sa.String(250))
    cleared_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Fence(Base):
    """The highest try number of one task instance that started writing one window of one target.

    Every attempt raises it when it starts writing and reads it again just before commit: an
    attempt that finds a higher number is fenced (`history.fences`), so an older attempt (a zombie,
    a duplicate dispatch) can never commit over a newer one's result.
    """

    __tablename__ = "idem_fence"
    __table_args__ = (sa.UniqueConstraint("fence_key"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    #: sha256 of (dag, run, task, map index, target, window): the natural key, short enough for
    #: every database's unique index (the columns together pass MariaDB's 3072-byte limit)
    fence_key: Mapped[str] = mapped_column(sa.String(64))
    dag_id: Mapped[str] = mapped_column(sa.String(250))
    run_id: Mapped[str] = mapped_column(sa.String(250))
    task_id: Mapped[str] = mapped_column(sa.String(250))
    map_index: Mapped[int] = mapped_column(sa.Integer)
    target: Mapped[str] = mapped_column(sa.String(500))
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    #: the newest attempt that started writing the window
    try_number: Mapped[int] = mapped_column(sa.Integer)
    hostname: Mapped[str | None] = mapped_column(sa.String(250))
    pid: Mapped[int | None] = mapped_column(sa.Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())


class BackfillSize(Base):
    """How many windows a backfill run's backfill covers and approves, as the scheduler saw it.

    Recorded by the listener when a backfill run starts (Airflow's BackfillDagRun rows, read in a
    session of its own); every guarded task of that run reads it before it writes, so a backfill
    created behind the guard's back writes nothing (`guard.sizes`).
    """

    __tablename__ = "idem_backfill_size"
    __table_args__ = (sa.UniqueConstraint("dag_id", "run_id", "backfill_id"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    dag_id: Mapped[str] = mapped_column(sa.String(250))
    run_id: Mapped[str] = mapped_column(sa.String(250))
    backfill_id: Mapped[int] = mapped_column(sa.Integer)
    windows: Mapped[int] = mapped_column(sa.Integer)
    approve_windows: Mapped[int | None] = mapped_column(sa.Integer)
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())


# ----------------------------------------------------------------------------------- effects
# The effect ledger's tables (see airflow_idempotent.effects.ledger for the state machine).
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

"""Partition switch plans: what an overwrite on an engine without transactions is about to switch.

A plan is recorded before the first partition is switched, so a rerun after a crash completes it
(every step is idempotent) instead of leaving a window half old, half new. Rows are keyed by the
attempt that made them; `status` goes staging -> switching -> done (or abandoned, then swept once
its staged files are deleted).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from airflow_idempotent.history.models import Base, UTCDateTime
from airflow_idempotent.history.store import HistoryStore, utcnow

STAGING, SWITCHING, DONE, ABANDONED = "staging", "switching", "done", "abandoned"
#: An abandoned attempt whose staged directories were deleted (nothing of it is left).
SWEPT = "swept"


class PartitionSwitch(Base):
    """One attempt's staged window and the catalog operations that make it the target's."""

    __tablename__ = "idem_partition_switch"
    __table_args__ = (
        sa.UniqueConstraint("attempt_id"),
        sa.Index("ix_idem_partition_switch_target", "target", "status"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    attempt_id: Mapped[str] = mapped_column(sa.String(64))
    target: Mapped[str] = mapped_column(sa.String(500))
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(sa.String(16))
    #: the engine session the attempt ran in (so a retry can interrupt what it left running)
    session_id: Mapped[str | None] = mapped_column(sa.String(64))
    staging_table: Mapped[str] = mapped_column(sa.String(250))
    location: Mapped[str] = mapped_column(sa.Text)
    #: JSON list of {"op": "set"|"add"|"drop", "value": "2026-08-25", "location": ...}
    operations: Mapped[str | None] = mapped_column(sa.Text)
    row_count: Mapped[int | None] = mapped_column(sa.BigInteger)
    checksum: Mapped[str | None] = mapped_column(sa.String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


@dataclass(frozen=True)
class SwitchPlan:
    attempt_id: str
    target: str
    window_start: datetime
    window_end: datetime
    status: str
    session_id: str | None
    staging_table: str
    location: str
    operations: list[dict[str, str]]
    row_count: int | None
    checksum: str | None


def _table() -> sa.Table:
    return PartitionSwitch.__table__  # type: ignore[return-value]


def begin(
    store: HistoryStore,
    attempt_id: str,
    target: str,
    window_start: datetime,
    window_end: datetime,
    session_id: str,
    staging_table: str,
    location: str,
) -> None:
    """Record an attempt's staging before it is created (so a rerun can drop an orphan):
    `location` its files; `staging_table` a catalog table to drop, or "" when it has none (the
    parquet switch stages plain files since; older plans name their staging table)."""
    store.migrate()
    now = utcnow()
    with store.engine.begin() as conn:
        conn.execute(
            _table()
            .insert()
            .values(
                attempt_id=attempt_id,
                target=target,
                window_start=window_start,
                window_end=window_end,
                status=STAGING,
                session_id=session_id,
                staging_table=staging_table,
                location=location,
                created_at=now,
                updated_at=now,
            )
        )


def set_status(store: HistoryStore, attempt_id: str, status: str, **values: Any) -> None:
    """Move a plan on (with its operations, count and checksum when it starts switching)."""
    if "operations" in values:
        values["operations"] = json.dumps(values["operations"])
    with store.engine.begin() as conn:
        conn.execute(
            _table()
            .update()
            .where(_table().c.attempt_id == attempt_id)
            .values(status=status, updated_at=utcnow(), **values)
        )


def unfinished(store: HistoryStore, target: str) -> list[SwitchPlan]:
    """Plans of `target` that an attempt left in staging or switching, oldest first."""
    return plans(store, target, (STAGING, SWITCHING))


def plans(store: HistoryStore, target: str, statuses: tuple[str, ...]) -> list[SwitchPlan]:
    """Plans of `target` in one of `statuses`, oldest first."""
    store.migrate()
    table = _table()
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(table)
            .where(table.c.target == target, table.c.status.in_(list(statuses)))
            .order_by(table.c.id)
        ).all()
    return [
        SwitchPlan(
            attempt_id=r.attempt_id,
            target=r.target,
            window_start=r.window_start,
            window_end=r.window_end,
            status=r.status,
            session_id=r.session_id,
            staging_table=r.staging_table,
            location=r.location,
            operations=json.loads(r.operations) if r.operations else [],
            row_count=r.row_count,
            checksum=r.checksum,
        )
        for r in rows
    ]

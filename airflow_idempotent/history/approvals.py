"""Approvals: a breached guarded window kept staged until a person decides (on_breach="approve").

One row per attempt (its natural key, like a window write's): the staged table holding the rows
the diff was computed from, its count and checksum, production's window count and checksum when
the diff was taken, the diff itself (with sample keys) and the breaches. `status` goes pending ->
approved (then swapped), rejected, timed_out, or from approved to stale (the data changed since
the diff) or not_swapped (the swap failed otherwise: a kill switch, the warehouse), or to
swap_retry (the swap failed for a reason that may pass: the task's retry swaps it, unasked). The
decision (who, when, comment) is written here before anything is swapped, so nothing reaches
production without an approval recorded in history.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from airflow_idempotent.history.models import Base, UTCDateTime
from airflow_idempotent.history.store import HistoryStore, utcnow
from airflow_idempotent.identity import AttemptIdentity

PENDING, APPROVED, REJECTED, TIMED_OUT, STALE = "pending", "approved", "rejected", "timed_out", "stale"
#: approved, but the swap failed for another reason (a kill switch, the warehouse): nothing swapped
NOT_SWAPPED = "not_swapped"
#: still pending when a newer attempt wrote the same window (the task cleared, marked, rerun): its
#: kept rows are dropped, and a late answer to its request swaps nothing
SUPERSEDED = "superseded"
#: approved, but the swap failed for a reason that may pass (the warehouse, a lock held past the
#: task's lock_timeout) while the task had a retry left: the kept rows stay, and the task's retry
#: swaps them without asking again if its code is the approved one (`carried`); then approved
SWAP_RETRY = "swap_retry"
DECIDED = (APPROVED, REJECTED, TIMED_OUT, STALE)
#: Kept rows still waiting for something: a decision, or the retry that swaps an approval.
WAITING = (PENDING, SWAP_RETRY)


class Approval(Base):
    """One breached window waiting for, or carrying, a person's decision."""

    __tablename__ = "idem_approval"
    __table_args__ = (
        sa.UniqueConstraint("dag_id", "run_id", "task_id", "map_index", "try_number"),
        sa.Index("ix_idem_approval_target", "target", "window_start", "window_end"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    dag_id: Mapped[str] = mapped_column(sa.String(250))
    run_id: Mapped[str] = mapped_column(sa.String(250))
    task_id: Mapped[str] = mapped_column(sa.String(250))
    map_index: Mapped[int] = mapped_column(sa.Integer)
    try_number: Mapped[int] = mapped_column(sa.Integer)
    target: Mapped[str] = mapped_column(sa.String(500))
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    window_label: Mapped[str] = mapped_column(sa.String(120))
    status: Mapped[str] = mapped_column(sa.String(16))
    #: swap (corrective) or reconcile: what an approval applies
    mode: Mapped[str] = mapped_column(sa.String(16))
    semantics: Mapped[str | None] = mapped_column(sa.String(32))
    policy_version: Mapped[str | None] = mapped_column(sa.String(64))
    stage_table: Mapped[str] = mapped_column(sa.String(250))
    stage_rows: Mapped[int] = mapped_column(sa.BigInteger)
    stage_checksum: Mapped[str] = mapped_column(sa.String(128))
    target_rows: Mapped[int] = mapped_column(sa.BigInteger)
    target_checksum: Mapped[str] = mapped_column(sa.String(128))
    diff: Mapped[str] = mapped_column(sa.Text)  # JSON: the guard's diff plus "samples"
    breaches: Mapped[str] = mapped_column(sa.Text)  # JSON list of sentences
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    decided_by: Mapped[str | None] = mapped_column(sa.String(250))
    comment: Mapped[str | None] = mapped_column(sa.Text)


@dataclass(frozen=True)
class PendingApproval:
    """What an approval request was made for: the staged rows and production as they were diffed."""

    target: str
    window_label: str
    status: str
    mode: str
    semantics: str | None
    policy_version: str | None
    stage_table: str
    stage_rows: int
    stage_checksum: str
    target_rows: int
    target_checksum: str
    diff: dict[str, Any]
    breaches: list[str]
    requested_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = None
    comment: str | None = None


def _table() -> sa.Table:
    return Approval.__table__  # type: ignore[return-value]


def _key(identity: AttemptIdentity) -> list[Any]:
    table = _table()
    return [
        table.c.dag_id == identity.dag_id,
        table.c.run_id == identity.run_id,
        table.c.task_id == identity.task_id,
        table.c.map_index == identity.map_index,
        table.c.try_number == identity.try_number,
    ]


def request(
    store: HistoryStore,
    identity: AttemptIdentity,
    window_start: datetime,
    window_end: datetime,
    pending: PendingApproval,
) -> None:
    """Record a pending approval (directly in the store: a request that is not recorded is not made)."""
    store.migrate()
    values = {
        "dag_id": identity.dag_id,
        "run_id": identity.run_id,
        "task_id": identity.task_id,
        "map_index": identity.map_index,
        "try_number": identity.try_number,
        "target": pending.target,
        "window_start": window_start,
        "window_end": window_end,
        "window_label": pending.window_label,
        "status": PENDING,
        "mode": pending.mode,
        "semantics": pending.semantics,
        "policy_version": pending.policy_version,
        "stage_table": pending.stage_table,
        "stage_rows": pending.stage_rows,
        "stage_checksum": pending.stage_checksum,
        "target_rows": pending.target_rows,
        "target_checksum": pending.target_checksum,
        "diff": json.dumps(pending.diff, default=str),
        "breaches": json.dumps(pending.breaches),
        "requested_at": pending.requested_at,
        "expires_at": pending.expires_at,
    }
    with store.engine.begin() as conn:
        store.adapter.insert_if_absent(conn, _table(), values)


def of_attempt(store: HistoryStore, identity: AttemptIdentity) -> PendingApproval | None:
    """The approval this attempt requested, as recorded (None when it requested none)."""
    store.migrate()
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(_table()).where(*_key(identity))).first()
    return None if row is None else _pending(row._mapping)


def _pending(row: Any) -> PendingApproval:
    return PendingApproval(
        target=row["target"],
        window_label=row["window_label"],
        status=row["status"],
        mode=row["mode"],
        semantics=row["semantics"],
        policy_version=row["policy_version"],
        stage_table=row["stage_table"],
        stage_rows=int(row["stage_rows"]),
        stage_checksum=row["stage_checksum"],
        target_rows=int(row["target_rows"]),
        target_checksum=row["target_checksum"],
        diff=json.loads(row["diff"]),
        breaches=json.loads(row["breaches"]),
        requested_at=row["requested_at"],
        expires_at=row["expires_at"],
        decided_at=row["decided_at"],
        decided_by=row["decided_by"],
        comment=row["comment"],
    )


def decide(
    store: HistoryStore,
    identity: AttemptIdentity,
    status: str,
    by: str | None,
    comment: str | None,
    at: datetime | None = None,
) -> datetime:
    """Record the decision on a pending approval, made `at` (when Airflow recorded the person's
    response; default now), and return that time; refuse when there is no pending one to decide."""
    at = at or utcnow()
    if status not in DECIDED:
        raise ValueError(f"an approval is decided as one of {DECIDED}, got {status!r}")
    with store.engine.begin() as conn:
        done = conn.execute(
            _table()
            .update()
            .where(*_key(identity), _table().c.status == PENDING)
            .values(status=status, decided_at=at, decided_by=by, comment=comment)
        )
        if done.rowcount != 1:
            raise LookupError(
                f"no pending approval of {identity.dag_id}.{identity.task_id} run {identity.run_id} try "
                f"{identity.try_number} to record {status!r} on"
            )
    return at


def mark(store: HistoryStore, identity: AttemptIdentity, status: str, comment: str | None) -> None:
    """Change a decided approval's status (an approval whose data changed becomes stale)."""
    with store.engine.begin() as conn:
        conn.execute(_table().update().where(*_key(identity)).values(status=status, comment=comment))


def carried(
    store: HistoryStore, identity: AttemptIdentity, target: str, window_start: datetime, window_end: datetime
) -> tuple[AttemptIdentity, PendingApproval] | None:
    """The approval an earlier try of this task instance got for this target and window, whose swap
    failed for a reason that may pass (`SWAP_RETRY`): (that try's identity, its approval), the
    latest such try; None when there is none."""
    store.migrate()
    table = _table()
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(table)
            .where(
                table.c.dag_id == identity.dag_id,
                table.c.run_id == identity.run_id,
                table.c.task_id == identity.task_id,
                table.c.map_index == identity.map_index,
                table.c.try_number < identity.try_number,
                table.c.target == target,
                table.c.window_start == window_start,
                table.c.window_end == window_end,
                table.c.status == SWAP_RETRY,
            )
            .order_by(table.c.try_number.desc())
            .limit(1)
        ).first()
    if row is None:
        return None
    return dataclasses.replace(identity, try_number=int(row.try_number)), _pending(row._mapping)


def supersede(
    store: HistoryStore, identity: AttemptIdentity, target: str, window_start: datetime, window_end: datetime
) -> list[str]:
    """Mark the pending approvals of this target and window made by other attempts (and those
    approved but waiting for their task's retry to swap them) superseded and return their kept
    tables (for the caller to drop): a newer attempt's diff is the one a person decides on, and an
    attempt that was cleared or marked by hand is never resumed to drop its own."""
    store.migrate()
    table = _table()
    mine = sa.and_(*_key(identity))
    with store.engine.begin() as conn:
        rows = conn.execute(
            sa.select(table.c.id, table.c.stage_table).where(
                table.c.target == target,
                table.c.window_start == window_start,
                table.c.window_end == window_end,
                table.c.status.in_(WAITING),
                sa.not_(mine),
            )
        ).all()
        superseded = []
        note = f"superseded by {identity.run_id} try {identity.try_number}"
        for row_id, stage in rows:  # only those still pending now: a decision made meanwhile stands
            done = conn.execute(
                table.update()
                .where(table.c.id == row_id, table.c.status.in_(WAITING))
                .values(status=SUPERSEDED, decided_at=utcnow(), comment=note)
            )
            if done.rowcount == 1:
                superseded.append(str(stage))
    return superseded


def of_target(
    store: HistoryStore, target: str | None = None, dag_id: str | None = None, limit: int = 500
) -> list[dict[str, Any]]:
    """Approvals, newest first, of one target or one DAG (what the history CLI and UI show)."""
    store.migrate()
    table = _table()
    query = sa.select(table).order_by(table.c.id.desc()).limit(limit)
    if target is not None:
        query = query.where(table.c.target == target)
    if dag_id is not None:
        query = query.where(table.c.dag_id == dag_id)
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    return [dict(r._mapping) for r in rows]


def for_windows(
    store: HistoryStore,
    targets: list[str],
    dag_ids: frozenset[str] | None = None,
    dag_id: str | None = None,
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """The approvals of `targets` made by `dag_ids` (the DAGs the reader may see; None: all) and
    `dag_id` (a filter), by (target, window start, window end), oldest first: what the history
    report shows beside a window's writes (who decided, when, why)."""
    if not targets or (dag_ids is not None and not dag_ids):
        return {}
    table = _table()
    query = sa.select(table).where(table.c.target.in_(sorted(set(targets))))
    if dag_ids is not None:
        query = query.where(table.c.dag_id.in_(sorted(dag_ids)))
    if dag_id is not None:
        query = query.where(table.c.dag_id == dag_id)
    with store.engine.connect() as conn:
        rows = conn.execute(query.order_by(table.c.id)).all()
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        m = r._mapping
        out.setdefault((m["target"], m["window_start"], m["window_end"]), []).append(
            {
                "dag_id": m["dag_id"],
                "run_id": m["run_id"],
                "task_id": m["task_id"],
                "try_number": m["try_number"],
                "status": m["status"],
                "requested_at": m["requested_at"],
                "expires_at": m["expires_at"],
                "decided_by": m["decided_by"],
                "decided_at": m["decided_at"],
                "comment": m["comment"],
                "breaches": json.loads(m["breaches"]),
            }
        )
    return out


def describe(approval: dict[str, Any]) -> str:
    """One line for a person: `approved by alice at 2026-...: signed off (run ..., try 1)`."""
    status = approval["status"]
    if status == PENDING:
        since, until = approval["requested_at"], approval["expires_at"]
        head = f"pending since {since:%Y-%m-%d %H:%M} (until {until:%Y-%m-%d %H:%M})"
    else:
        who = f" by {approval['decided_by']}" if approval["decided_by"] else ""
        at = f" at {approval['decided_at']:%Y-%m-%d %H:%M:%S}" if approval["decided_at"] else ""
        head = f"{status}{who}{at}"
    comment = f": {approval['comment']}" if approval["comment"] else ""
    return f"{head}{comment} ({approval['run_id']}, try {approval['try_number']})"

"""Which attempt of which task of which run is writing: the natural key of its history record.

The operators and the effects both record under it, so a retry, a rerun and a backfill of the
same window are told apart the same way everywhere.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_idempotent.history.store import WriteRecord, utcnow
from airflow_idempotent.window import Window

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator, Context


#: How a write record's message names the commit's version in the table format (Delta's version).
TABLE_VERSION_NOTE = "table version "


class Counted(Protocol):
    """What a write did to its window: a WriteResult, a GuardedResult."""

    @property
    def rows_deleted(self) -> int: ...
    @property
    def rows_inserted(self) -> int: ...
    @property
    def rows_updated(self) -> int: ...
    @property
    def row_count(self) -> int | None: ...
    @property
    def checksum(self) -> str | None: ...


def result_counts(result: Counted | None) -> dict[str, Any]:
    """A write's counts and checksum as history-record fields (none when nothing was written)."""
    if result is None:
        return {}
    counts: dict[str, Any] = {
        "rows_deleted": result.rows_deleted,
        "rows_inserted": result.rows_inserted,
        "rows_updated": result.rows_updated,
        "row_count": result.row_count,
        "checksum": result.checksum,
    }
    version = getattr(result, "table_version", None)
    if version is not None:  # a table format's own version of the commit (Delta), beside ours
        counts["message"] = f"{TABLE_VERSION_NOTE}{version}"
    return counts


@dataclass(frozen=True)
class AttemptIdentity:
    """Which attempt of which task of which run is writing: the natural key of its history record."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    run_type: str | None

    @classmethod
    def from_context(cls, context: Context | Mapping[str, Any], task: BaseOperator) -> AttemptIdentity:
        ti = context.get("ti") or context.get("task_instance")
        dag_run = context.get("dag_run")
        run_type = getattr(dag_run, "run_type", None)
        if ti is None:  # called outside Airflow (tests, scripts): every call is its own attempt
            dag = getattr(task, "dag", None) if task.has_dag() else None
            return cls(
                dag_id=getattr(dag, "dag_id", None) or "adhoc",
                run_id=str(context.get("run_id") or f"adhoc__{uuid.uuid4().hex}"),
                task_id=task.task_id,
                map_index=-1,
                try_number=1,
                run_type=str(run_type) if run_type else "adhoc",
            )
        map_index = getattr(ti, "map_index", -1)
        return cls(
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            map_index=-1 if map_index is None else int(map_index),
            try_number=int(getattr(ti, "try_number", 1) or 1),
            run_type=str(getattr(run_type, "value", run_type)) if run_type else None,
        )

    def label(self) -> str:
        """The attempt as one text, e.g. ``payouts/scheduled__2026-08-25/load/-1/try-2``: what a Delta
        commit is tagged with, so a later try finds the commits of earlier ones by its prefix."""
        return f"{self.dag_id}/{self.run_id}/{self.task_id}/{self.map_index}/try-{self.try_number}"

    def write_record(
        self,
        target: str,
        window: Window,
        strategy: str,
        status: str,
        digest: str,
        parts: str,
        policy: str | None,
        semantics: str | None,
        **counts: Any,
    ) -> WriteRecord:
        return WriteRecord(
            dag_id=self.dag_id,
            run_id=self.run_id,
            task_id=self.task_id,
            map_index=self.map_index,
            try_number=self.try_number,
            target=target,
            window_start=window.start,
            window_end=window.end,
            window_label=window.label(),
            strategy=strategy,
            status=status,
            fingerprint=digest,
            fingerprint_parts=parts,
            written_at=utcnow(),
            run_type=self.run_type,
            semantics=semantics,
            policy_version=policy,
            **counts,
        )

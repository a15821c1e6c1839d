"""Which attempt of which task of which run is writing: the natural key of its history record.

The operators and the effects both record under it, so a retry, a rerun and a backfill of the
same window are told apart the same way everywhere.
"""

from __future__ import annotations

import re
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


def with_counts(message: str | None, result: Counted | None) -> dict[str, Any]:
    """`result_counts` with `message` kept beside the table version's note (one message field)."""
    counts = result_counts(result)
    note = counts.pop("message", None)
    joined = "; ".join(m for m in (message, note) if m)
    return {**counts, "message": joined or None}


def table_version(message: str | None) -> int | None:
    """The table format's version a write record's message names (`result_counts`), if any."""
    found = re.search(rf"{re.escape(TABLE_VERSION_NOTE)}(-?\d+)", message or "")
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class CodeIdentity:
    """Which code an attempt ran: the DAG version Airflow ran it under and the bundle it came from.

    Airflow 3 versions DAGs: a clear or a backfill may run the latest version or the run's original
    one (`[core] rerun_with_latest_version`), so the rendered SQL alone cannot say which code wrote
    a window. The task runner hands the worker the version's id (`ti.dag_version_id`) and the bundle
    (`ti.bundle_instance`: name, and version for a versioned bundle such as git); the version's
    number is Airflow's metadata, which a worker may not read, so it is kept when the task instance
    carries it (an ORM task instance does) and otherwise looked up by the readers
    (`history.dag_versions`).
    """

    dag_version_id: str | None = None
    dag_version_number: int | None = None
    bundle_name: str | None = None
    bundle_version: str | None = None

    @classmethod
    def of_task_instance(cls, ti: Any) -> CodeIdentity:
        if ti is None:
            return cls()
        version_id = getattr(ti, "dag_version_id", None)
        version = getattr(ti, "dag_version", None)  # the ORM task instance's relationship
        number = getattr(version, "version_number", None)
        bundle = getattr(ti, "bundle_instance", None)
        name = getattr(bundle, "name", None) or getattr(version, "bundle_name", None)
        bundle_version = getattr(bundle, "version", None) or getattr(version, "bundle_version", None)
        return cls(
            dag_version_id=str(version_id) if version_id else None,
            dag_version_number=int(number) if isinstance(number, int) else None,
            bundle_name=str(name) if name else None,
            bundle_version=str(bundle_version) if bundle_version else None,
        )

    def parts(self) -> dict[str, Any]:
        """What the fingerprint takes of the code: a new DAG version or bundle version is a new write
        (the number is left out: the id names the version, and a reader may only learn it later)."""
        return {
            "dag_version_id": self.dag_version_id,
            "bundle_name": self.bundle_name,
            "bundle_version": self.bundle_version,
        }

    def fields(self) -> dict[str, Any]:
        """The history record's fields."""
        return {**self.parts(), "dag_version_number": self.dag_version_number}


@dataclass(frozen=True)
class AttemptIdentity:
    """Which attempt of which task of which run is writing: the natural key of its history record."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    run_type: str | None
    code: CodeIdentity = CodeIdentity()

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
            code=CodeIdentity.of_task_instance(ti),
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
            **self.code.fields(),
            **counts,
        )

"""Airflow's DAG versions as the readers of history see them: the CLI, the UI and the rerun preview.

A worker knows the id of the DAG version it runs (`ti.dag_version_id`) but not its number, which is
Airflow's metadata and may not be read from task code; a write record keeps the id, and a reader
that runs where Airflow's metadata database is (the API server, the `airflow-idempotent` CLI next
to Airflow) looks the numbers up here. Nothing here writes; a reader without Airflow's database
gets no numbers (None), never an error.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DagVersionInfo:
    """One version of a DAG as Airflow recorded it."""

    id: str
    number: int
    bundle_name: str | None
    bundle_version: str | None

    def describe(self) -> str:
        bundle = f", bundle {self.bundle_name}" if self.bundle_name else ""
        bundle += f"@{self.bundle_version}" if self.bundle_version else ""
        return f"v{self.number} ({self.id}{bundle})"

    def to_json(self) -> dict[str, Any]:
        return {
            "dag_version_id": self.id,
            "dag_version_number": self.number,
            "bundle_name": self.bundle_name,
            "bundle_version": self.bundle_version,
        }


def _info(row: Any) -> DagVersionInfo:
    return DagVersionInfo(str(row.id), int(row.version_number), row.bundle_name, row.bundle_version)


def versions_by_id(ids: Iterable[str | None]) -> dict[str, DagVersionInfo]:
    """The DAG versions with these ids ({} when Airflow's metadata database cannot be read)."""
    wanted: list[uuid.UUID] = []
    for value in {i for i in ids if i}:
        try:
            wanted.append(uuid.UUID(value))
        except ValueError:
            continue
    if not wanted:
        return {}
    try:
        import sqlalchemy as sa
        from airflow.models.dag_version import DagVersion
        from airflow.utils.session import create_session

        with create_session() as session:
            rows = session.scalars(sa.select(DagVersion).where(DagVersion.id.in_(wanted))).all()
            return {str(r.id): _info(r) for r in rows}
    except Exception as err:  # no metadata database here: the records' own fields stand
        log.debug("DAG version numbers not looked up: %s", err)
        return {}


def latest_version(dag_id: str) -> DagVersionInfo | None:
    """The DAG's latest version (what a new run, and a rerun on the latest version, runs), or None."""
    try:
        from airflow.models.dag_version import DagVersion
        from airflow.utils.session import create_session

        with create_session() as session:
            row = DagVersion.get_latest_version(dag_id, session=session)
            return None if row is None else _info(row)
    except Exception as err:
        log.debug("latest DAG version of %s not read: %s", dag_id, err)
        return None


def reruns_on_latest(dag_id: str, backfill: bool) -> bool | None:
    """Whether a rerun runs the DAG's latest version, by Airflow's own precedence (the DAG's
    `rerun_with_latest_version`, then `[core] rerun_with_latest_version`): a clear defaults to the
    run's original version, a backfill to the latest. None when it cannot be read here."""
    try:
        from airflow.api_fastapi.common.dagbag import resolve_run_on_latest_version
        from airflow.utils.session import create_session

        with create_session() as session:
            return bool(resolve_run_on_latest_version(None, dag_id, session, fallback=backfill))
    except Exception as err:
        log.debug("rerun_with_latest_version of %s not read: %s", dag_id, err)
        return None


def fill_versions(writes: Iterable[MutableMapping[str, Any]]) -> None:
    """Complete each write record's code fields from the DAG version Airflow has for its id: the
    number (a worker cannot read it), and the bundle when the run had no bundle instance to name
    it (`dag.test()` runs tasks in process, without one)."""
    writes = list(writes)
    missing = [
        w.get("dag_version_id")
        for w in writes
        if w.get("dag_version_number") is None or w.get("bundle_name") is None
    ]
    found = versions_by_id(missing)
    for w in writes:
        info = found.get(w.get("dag_version_id") or "")
        if info is None:
            continue
        if w.get("dag_version_number") is None:
            w["dag_version_number"] = info.number
        if w.get("bundle_name") is None:
            w["bundle_name"], w["bundle_version"] = info.bundle_name, info.bundle_version


def version_label(write: Mapping[str, Any]) -> str | None:
    """``v3`` (Airflow's number), or the version id's head when the number is unknown here."""
    if write.get("dag_version_number") is not None:
        return f"v{write['dag_version_number']}"
    return str(write["dag_version_id"])[:8] if write.get("dag_version_id") else None


def bundle_label(write: Mapping[str, Any]) -> str | None:
    """``name@version`` of the DAG bundle (a bundle without versions: its name), or None."""
    if not write.get("bundle_name"):
        return None
    return str(write["bundle_name"]) + (f"@{write['bundle_version']}" if write.get("bundle_version") else "")

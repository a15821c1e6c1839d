"""Which code a rerun of a window runs, beside the code that wrote it.

Airflow 3 versions DAGs: a clear reruns a run on its original DAG version unless
`rerun_with_latest_version` says otherwise, a backfill runs the latest one by default. A window
written by version 1 and rerun after the DAG file changed may run either; the preview says which,
and whether it differs from the version each covered period was last written by (the history
record's `dag_version_id`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_idempotent.history import dag_versions
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.window import Window

CODE_FIELDS = ("dag_version_id", "dag_version_number", "bundle_name", "bundle_version")


@dataclass
class CodeCheck:
    """The DAG version that wrote each period, the latest one, and the one a rerun would run."""

    latest: dag_versions.DagVersionInfo | None
    on_latest: bool | None
    #: per period label: the last write's DAG version fields (None: never written, or unrecorded)
    written: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    @property
    def changed_periods(self) -> list[str]:
        """The periods last written by a DAG version other than the latest."""
        if self.latest is None:
            return []
        return [
            label
            for label, w in self.written.items()
            if w is not None and w.get("dag_version_id") and w["dag_version_id"] != self.latest.id
        ]

    def would_run(self) -> str:
        """Which version a rerun runs, as a sentence."""
        if self.on_latest is None:
            return "which DAG version a rerun runs is unknown here (Airflow's metadata is not readable)"
        if self.on_latest:
            latest = self.latest.describe() if self.latest else "the latest version"
            return f"a rerun runs the DAG's latest version, {latest} (rerun_with_latest_version)"
        return (
            "a rerun by clearing runs the run's original DAG version (rerun_with_latest_version is off); "
            "a new run or a backfill on the latest version runs "
            + (self.latest.describe() if self.latest else "the latest version")
        )

    def reasons(self) -> list[str]:
        out: list[str] = []
        for label in self.changed_periods:
            w = self.written[label] or {}
            written = dag_versions.version_label(w) or str(w.get("dag_version_id"))
            latest = self.latest.describe() if self.latest else "?"
            out.append(f"DAG version changed: {label} was written by {written}, the DAG is now at {latest}")
        unknown = [
            label for label, w in self.written.items() if w is not None and not w.get("dag_version_id")
        ]
        if unknown:
            out.append(f"no DAG version recorded for the last write of {', '.join(unknown)}")
        if self.written and not self.changed_periods and not unknown and self.latest is not None:
            out.append(f"same DAG version as the last write: {self.latest.describe()}")
        out.append(self.would_run())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "latest": self.latest.to_json() if self.latest else None,
            "runs_latest": self.on_latest,
            "would_run": self.would_run(),
            "written_by": self.written,
            "differs": bool(self.changed_periods),
            "changed_periods": self.changed_periods,
        }


def code_check(
    store: HistoryStore | None, dag_id: str, target: str, periods: Sequence[Window], backfill: bool
) -> CodeCheck:
    """The DAG version that last wrote each of `periods` of `target`, and what a rerun would run."""
    check = CodeCheck(dag_versions.latest_version(dag_id), dag_versions.reruns_on_latest(dag_id, backfill))
    for period in periods:
        last = store.last_write(target, period) if store is not None else None
        if last is None:
            check.written[period.label()] = None
            continue
        fields = {
            k: last.get(k) for k in ("dag_version_id", "dag_version_number", "bundle_name", "bundle_version")
        }
        check.written[period.label()] = fields
    dag_versions.fill_versions(w for w in check.written.values() if w is not None)
    return check

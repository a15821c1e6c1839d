"""Spark's writes, by the target's table format as the catalog names it.

A Delta table commits the window itself (`delta`), an Iceberg table in one snapshot of its own
(`iceberg`); a parquet table gets the crash-safe partition
switch (`airflow_idempotent.spark.switch`), and a merge into one is refused before anything is
written, since Spark refuses MERGE INTO on parquet tables. The format is read once per write, in
the session that then writes a Delta or Iceberg table, which uses that description.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from airflow_idempotent.spark import delta, iceberg
from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkTableInfo
from airflow_idempotent.write_spec import WriteResult, WriteSpec

log = logging.getLogger(__name__)


def overwrite(adapter: SparkAdapter, spec: WriteSpec, history_conn_id: str, target: str) -> WriteResult:
    """Replace the window (with lookback, the covered periods' span): one REPLACE WHERE commit on
    Delta, one checked REPLACE WHERE snapshot on Iceberg, the partition switch on parquet (which
    refuses lookback)."""
    with adapter.engine.connect() as conn:
        info = adapter.describe(conn, spec.table)
        if delta.is_delta(info):
            return delta.overwrite(adapter, conn, spec, info)
        if iceberg.is_iceberg(info):
            return iceberg.overwrite(adapter, conn, spec, info)
    if spec.periods:  # refused before anything is staged: the switch records one window a write
        raise adapter.lookback_refused(spec.table, len(spec.periods) - 1)
    from airflow_idempotent.history.store import HistoryStore
    from airflow_idempotent.spark.switch import overwrite_by_switch

    # the description just read, in the session before: the switch need not read it again
    return overwrite_by_switch(adapter, spec, HistoryStore.from_airflow(history_conn_id), target, info=info)


def merge(adapter: SparkAdapter, spec: WriteSpec, keys: Sequence[str], delete_missing: bool) -> WriteResult:
    """Upsert on `keys`: one MERGE INTO commit on Delta or Iceberg; refused on any other format,
    nothing written."""
    with adapter.engine.connect() as conn:
        info: SparkTableInfo = adapter.describe(conn, spec.table)
        if iceberg.is_iceberg(info):
            return iceberg.merge(adapter, conn, spec, keys, delete_missing, info=info)
        if not delta.is_delta(info):
            raise adapter.merge_refused(spec.table)
        return delta.merge(adapter, conn, spec, keys, delete_missing, info=info)


def commit_stage(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    stage: str,
    columns: Sequence[str],
    keys: Sequence[str],
    mode: str,
    is_delta: bool,
    before_commit: Callable[[], None] | None = None,
) -> delta.DeltaResult:
    """Commit a staging table (of the target's format, typed like it, the window's rows) into the
    window of a Delta or Iceberg table by ONE statement of the format: REPLACE WHERE (a swap), or
    (a reconcile) MERGE .. WHEN NOT MATCHED BY SOURCE .. DELETE touching only the changed rows.
    `before_commit` (default `spec.before_commit`) runs just before it: the kill switch's last word.
    The guarded commit's (`spark.guard`) and an approved window's (`spark.approval`)."""
    swap = dataclasses.replace(
        spec,
        query=adapter.select_columns(stage, columns),
        params={},
        before_commit=before_commit or spec.before_commit,
    )
    fmt = delta if is_delta else iceberg
    if mode == "reconcile":
        return fmt.merge(adapter, conn, swap, keys, True, changed_only=True)
    return fmt.overwrite(adapter, conn, swap)

"""A breached window's approval on Delta and Iceberg tables (on_breach="approve" on Spark).

The guarded commit (`spark.guard.guarded_commit`) stages the window in a table of the target's
format and diffs it in the cluster. On a breach with a table to keep (`keep_stage`) the staged rows
are copied to that table, in the target's catalog and schema (an Iceberg table's in its catalog,
so of the same format), named by the approval (`operators.approval.kept_stage_name`, prefix
``_idem_apr_``: not a ``_idem_stg_`` staging, so the window's next guarded write does not sweep
it); their count and checksum, production's window's, the sample keys and the table's version the
diff read (a Delta version, an Iceberg snapshot id) go with the pending approval.

Once a person approves, `commit_approved` commits them under the (table, window) lock by the
guarded commit's own ONE statement (`writes.commit_stage`: REPLACE WHERE, or the reconcile's
MERGE), only if the kept rows still have the approved count and checksum and the table is still
at the version the diff read; otherwise StaleApproval names both versions and nothing is written.
The operator drops the kept table once decided (`SparkAdapter.drop_kept`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_idempotent.adapters.identifiers import table_parts
from airflow_idempotent.guard.approval import StaleApproval, diff_of
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.results import GuardedResult, KeptStage
from airflow_idempotent.guard.write import kept_stage
from airflow_idempotent.history.approvals import PendingApproval
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.spark import delta, iceberg
from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkTableInfo
from airflow_idempotent.spark.switch import store_lock
from airflow_idempotent.spark.writes import commit_stage
from airflow_idempotent.strategies import checksum_window, prepare, window_binds
from airflow_idempotent.write_spec import WriteSpec

log = logging.getLogger(__name__)


def kept_name(table: str, keep: str) -> str:
    """The kept table `keep` (a bare name) in `table`'s catalog and schema."""
    catalog, schema, _ = table_parts(table)
    return ".".join(p for p in (catalog, schema, keep) if p)


def read_version(conn: SparkConnection, adapter: SparkAdapter, table: str, is_delta: bool) -> int | None:
    """The table's current version: its latest Delta version, or the snapshot its Iceberg main
    branch points at (refreshed first: the session's catalog caches an Iceberg table's metadata);
    None for an Iceberg table never written."""
    if is_delta:
        return delta.history(conn, adapter, table, 1)[0].version
    conn.sql(adapter.refresh(table))
    return iceberg.current_snapshot(conn, adapter, table)


def keep_stage(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    info: SparkTableInfo,
    stage: str,
    keep: str,
    using: str,
    keys: Sequence[str],
    params: Mapping[str, Any],
    version: int | None,
) -> KeptStage:
    """Copy the staged rows to table `keep` (a bare name, put beside the target), of the target's
    format, and take what the approval is recorded with: the kept rows' count and checksum,
    production's window's, the sample keys and `version` (the table's, read before the diff)."""
    name = kept_name(spec.table, keep)
    columns = list(info.columns)
    copy = adapter.select_columns(stage, columns)
    conn.sql(f"CREATE TABLE {adapter.qualified(name)} USING {using} AS {adapter.render(copy)}")
    try:
        window_only = window_binds(params)
        staged = dataclasses.replace(spec, table=name, checksum=True)
        rows, checksum = checksum_window(adapter, conn, staged, info, window_only)  # type: ignore[arg-type]
        kept = kept_stage(
            adapter,
            conn,  # type: ignore[arg-type]  # a Spark Connect session, as checksum_window takes it
            spec,
            info,
            name,
            rows,
            checksum,
            columns,
            keys,
            window_only,
            version,
            True,
        )
    except BaseException:
        adapter.drop_kept(name)  # a half-made kept table waits for nobody
        raise
    log.warning(
        "the breached staging of %s window %s is kept in %s (%d rows) for a decision, diffed at table "
        "version %s",
        spec.table,
        spec.window.label(),
        name,
        kept.rows,
        version,
    )
    return kept


def commit_approved(
    adapter: SparkAdapter,
    spec: WriteSpec,
    keys: Sequence[str],
    pending: PendingApproval,
    *,
    store: HistoryStore,
) -> GuardedResult:
    """Commit an approved window of a Delta or Iceberg table from its kept rows, under the (table,
    window) lock, by the guarded commit's one statement; StaleApproval (nothing written) unless the
    kept rows have the approved count and checksum and the table is at the version the diff read."""
    assert spec.partition_column is not None
    kept = pending.stage_table
    recorded = pending.diff.get("table_version")
    diff = diff_of(pending.diff)
    store.migrate()
    with (
        store_lock(store, f"switch:{pending.target}", spec.window, spec.lock_timeout),
        adapter.engine.connect() as conn,
    ):
        info, _, params = prepare(adapter, conn, spec)  # type: ignore[arg-type]
        assert isinstance(info, SparkTableInfo)
        if not (delta.is_delta(info) or iceberg.is_iceberg(info)):
            raise GuardRefusal(
                f"{spec.table} is no longer a Delta or Iceberg table ({info.provider or 'unknown'}): its "
                "approval cannot be committed. Nothing was written. Rerun the window to diff it again."
            )
        is_delta = delta.is_delta(info)
        window_only = window_binds(params)
        key_names = [info.column(k, "key column").name for k in keys]
        changed = []
        try:
            checked = dataclasses.replace(spec, table=kept, checksum=True)
            rows, checksum = checksum_window(adapter, conn, checked, info, window_only)  # type: ignore[arg-type]
        except Exception as err:  # dropped by hand, or its files gone
            rows, checksum = None, f"unreadable ({type(err).__name__})"
        if (rows, checksum) != (pending.stage_rows, pending.stage_checksum):
            changed.append(
                f"the kept rows {kept} are now {rows} rows, checksum {checksum} (approved: "
                f"{pending.stage_rows}, {pending.stage_checksum})"
            )
        now = read_version(conn, adapter, spec.table, is_delta)
        if "table_version" not in pending.diff or now != recorded:
            changed.append(
                f"{spec.table} is at {'Delta version' if is_delta else 'Iceberg snapshot'} {now}, "
                f"the diff read {recorded}: the table changed after the diff"
            )
        if changed:
            raise StaleApproval(
                f"the approval of {pending.target} window {pending.window_label} was for other data: "
                f"{'; '.join(changed)}. Nothing was committed. Rerun the window to diff it again."
            )
        written = commit_stage(
            adapter, conn, spec, kept, list(info.columns), key_names, pending.mode, is_delta
        )
    log.info(
        "committed the approved window %s of %s from %s (diffed at version %s) as version %s",
        pending.window_label,
        spec.table,
        kept,
        recorded,
        written.table_version,
    )
    return GuardedResult.of_commit(pending.mode, diff, written, None)

"""A breached window's approval (on_breach="approve"): what a person is shown, and the approved swap.

When a guarded window's diff breaks a threshold and its DAG declares `on_breach="approve"`, the
guarded write keeps the staged rows in a table of their own (`guarded_write(keep_on_breach=...)`),
the operator records a pending approval in history (`history.approvals`) and asks through
Airflow's human-in-the-loop machinery (the task instance's required action). This module holds the
two halves that do not depend on Airflow:

- `request_body`: the Markdown a person decides on (rows added, removed, changed, unchanged,
  per-measure totals before and after, sample keys, the breaches);
- `swap_approved`: after an approval, in one transaction under the (table, window) lock, check that
  the kept rows and production's window are exactly as they were diffed (row count and checksum),
  else refuse (the approval was for other data); then swap or reconcile from the kept rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.guard.diff import WindowDiff
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.results import GuardedResult
from airflow_idempotent.guard.write import apply_stage, stage_checksum
from airflow_idempotent.history.approvals import PendingApproval
from airflow_idempotent.strategies import checksum_window, prepare, window_binds
from airflow_idempotent.write_spec import WriteSpec

APPROVE, REJECT = "Approve", "Reject"
OPTIONS = [APPROVE, REJECT]
#: The free-text field a person explains the decision in (recorded with the approval).
COMMENT = "comment"


class StaleApproval(GuardRefusal):
    """The kept rows or production's window changed after the diff a person approved."""


def diff_of(data: Mapping[str, Any]) -> WindowDiff:
    """The WindowDiff of a recorded diff (`WindowDiff.to_json`), exactly as it was counted."""
    return WindowDiff(
        rows_before=int(data["rows_before"]),
        rows_after=int(data["rows_after"]),
        added=int(data["added"]),
        removed=int(data["removed"]),
        changed=int(data["changed"]),
        unchanged=int(data["unchanged"]),
        measures={
            m: (Decimal(str(v["before"])), Decimal(str(v["after"])))
            for m, v in data.get("measures", {}).items()
        },
    )


def subject(pending: PendingApproval) -> str:
    return f"Approve the guarded write of {pending.target} window {pending.window_label}?"


def request_body(pending: PendingApproval) -> str:
    """The Markdown shown in Airflow's required actions: the diff, the breaches, sample keys."""
    d = pending.diff
    lines = [
        f"**{pending.target}**, window **{pending.window_label}** ({pending.semantics or 'corrective'}, "
        f"policy {pending.policy_version or '-'}): the diff breaks the guard's thresholds, so nothing "
        "was swapped. Approve to swap exactly the staged rows below into production; reject to refuse "
        "this window only (the backfill's other windows go on); with no decision before the timeout, the "
        "window is refused and the backfill stops (kill switch).",
        "",
        "Breaches:",
        *[f"- {b}" for b in pending.breaches],
        "",
        "| rows before | rows after | added | removed | changed | unchanged |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {d['rows_before']} | {d['rows_after']} | {d['added']} | {d['removed']} | {d['changed']} "
        f"| {d['unchanged']} |",
    ]
    measures = d.get("measures") or {}
    if measures:
        lines += ["", "| measure | total before | total after | change |", "|---|---:|---:|---:|"]
        lines += [f"| {m} | {v['before']} | {v['after']} | {v['delta']} |" for m, v in measures.items()]
    samples = d.get("samples") or {}
    for kind in ("changed", "added", "removed"):
        if samples.get(kind):
            lines += ["", f"Sample {kind} keys: " + ", ".join(str(k) for k in samples[kind])]
    # a Delta or Iceberg table (Spark): the table's version (snapshot id) the diff read
    version = f", table version {d['table_version']}" if "table_version" in d else ""
    lines += [
        "",
        f"Staged: {pending.stage_rows} rows in `{pending.stage_table}` "
        f"(checksum `{pending.stage_checksum}`); "
        f"production's window: {pending.target_rows} rows (checksum `{pending.target_checksum}`{version}). "
        "An approval is refused if either changed before the swap.",
    ]
    return "\n".join(lines)


def swap_approved(
    adapter: EngineAdapter,
    spec: WriteSpec,
    keys: Sequence[str],
    pending: PendingApproval,
) -> GuardedResult:
    """Apply an approved window: one locked transaction that refuses (StaleApproval, nothing
    changed) unless the kept rows and production's window still have the diffed count and checksum,
    then swaps or reconciles from the kept rows and checksums what it will commit."""
    assert spec.partition_column is not None
    stage = pending.stage_table
    diff = diff_of(pending.diff)
    with adapter.locked_transaction(spec.table, spec.lock_windows, spec.lock_timeout) as conn:
        adapter.prepare_connection(conn)
        kept = adapter.describe(conn, stage)
        columns = [c.name for c in kept.columns.values()]
        staged = dataclasses.replace(spec, query=adapter.select_columns(stage, columns))
        info, columns, params = prepare(adapter, conn, staged)
        window_only = window_binds(params)
        key_names = [info.column(k, "key column").name for k in keys]
        checked = dataclasses.replace(spec, checksum=True)
        rows, checksum = stage_checksum(adapter, conn, checked, stage, window_only)
        target_rows, target_checksum = checksum_window(adapter, conn, checked, info, window_only)
        changed = []
        if (rows, checksum) != (pending.stage_rows, pending.stage_checksum):
            changed.append(
                f"the staged rows are now {rows} rows, checksum {checksum} (approved: "
                f"{pending.stage_rows}, {pending.stage_checksum})"
            )
        if (target_rows, target_checksum) != (pending.target_rows, pending.target_checksum):
            changed.append(
                f"production's window is now {target_rows} rows, checksum {target_checksum} (when diffed: "
                f"{pending.target_rows}, {pending.target_checksum})"
            )
        if changed:
            raise StaleApproval(
                f"the approval of {pending.target} window {pending.window_label} was for other data: "
                f"{'; '.join(changed)}. Nothing was swapped. Rerun the window to diff it again."
            )
        if spec.before_commit is not None:
            spec.before_commit()
        deleted, updated, inserted = apply_stage(
            adapter, conn, spec, stage, columns, key_names, window_only, diff, pending.mode
        )
        row_count, after = checksum_window(adapter, conn, spec, info, window_only)
    return GuardedResult.committed(
        pending.mode, diff, after, row_count, None, deleted=deleted, inserted=inserted, updated=updated
    )


def drop_kept(adapter: EngineAdapter, table: str) -> None:
    """Drop a kept stage once decided, as its engine drops one (`EngineAdapter.drop_kept`: its own
    statement on a warehouse; on Spark the Delta or Iceberg table, an Iceberg one purged)."""
    adapter.drop_kept(table)

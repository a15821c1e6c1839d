"""Stage, diff, swap on an engine without transactions (Spark): the guard over the partition switch.

The same contract as `guard.write.guarded_write`, whose transaction Spark cannot give: the
window's rows are staged in a fresh per-attempt location by `spark.switch`, diffed there
with production by key in the cluster (rows added, removed, changed; each measure's sum before
and after: no row passes through the worker), judged against the thresholds, and only then
switched in. On a breach (or the kill switch) nothing is switched: the staging is dropped, the
attempt is recorded abandoned, and the GuardBreach carries the diff for the history record.

- ``swap`` (corrective): switch the window's partitions to the staged ones;
- ``replay``: compare the staged checksum with the recorded one and switch nothing;
- ``reconcile`` is refused before anything runs: it touches only the changed rows with DELETE
  and UPDATE, which Spark refuses on parquet tables.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from airflow_idempotent.checksum import checksum_rows
from airflow_idempotent.guard.config import Thresholds
from airflow_idempotent.guard.diff import WindowDiff, diff_window
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.results import GuardBreach, GuardedResult
from airflow_idempotent.guard.write import (
    MODES,
    Mode,
    breach_message,
    check_complete,
    check_guarded_args,
    check_target_keys,
)
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.spark.adapter import SparkAdapter, SparkTableInfo
from airflow_idempotent.spark.switch import overwrite_by_switch
from airflow_idempotent.strategies import WriteSpec, check_keys, window_binds

log = logging.getLogger(__name__)


class _Replayed(Exception):
    """Internal: a replay's staged checksum is known; leave the switch without switching."""

    def __init__(self, result: GuardedResult) -> None:
        super().__init__("replayed")
        self.result = result


def guarded_switch(
    adapter: SparkAdapter,
    spec: WriteSpec,
    keys: Sequence[str],
    measures: Sequence[str],
    thresholds: Thresholds,
    mode: Mode,
    expected_checksum: str | None = None,
    completeness_sql: exp.Expr | None = None,
    before_commit: Callable[[], None] | None = None,
    *,
    store: HistoryStore,
    target: str,
) -> GuardedResult:
    """`guarded_write`'s arguments, plus the history store (lock, switch plans) and the target."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "reconcile":
        raise GuardRefusal(
            f"a reconcile of {spec.table} deletes and updates only the rows that changed, and Spark refuses "
            "DELETE and UPDATE on the parquet tables of its catalog: run the backfill as corrective "
            "(semantics='corrective'), which switches the window's partitions whole after the same diff "
            "and thresholds. Nothing was written."
        )
    check_guarded_args(spec, mode, keys, expected_checksum, completeness_sql)
    seen: dict[str, WindowDiff] = {}

    def inspect(
        conn: Any, stage: str, info: SparkTableInfo, columns: list[str], params: dict[str, Any], checksum: str
    ) -> None:
        window_only = window_binds(params)
        check_complete(adapter, conn, spec, completeness_sql, params, nothing="switched in")
        key_names = [info.column(k, "key column").name for k in keys]
        wanted = [*measures, *thresholds.max_measure_abs_change, *thresholds.max_measure_rel_change]
        measure_names = list(dict.fromkeys(info.column(m, "measure column").name for m in wanted))
        staged = dataclasses.replace(spec, query=adapter.select_columns(stage, columns))
        check_keys(adapter, conn, staged, key_names, window_only)
        check_target_keys(adapter, conn, spec, info, key_names, window_only)
        diff = diff_window(adapter, conn, spec, stage, columns, key_names, measure_names, window_only)
        seen["diff"] = diff
        breaches = diff.breaches(thresholds)
        if mode == "replay":
            rows = checksum_rows(checksum)
            raise _Replayed(GuardedResult.replayed(mode, diff, checksum, rows, breaches, expected_checksum))
        if breaches:
            result = GuardedResult.refused(mode, diff, breaches, expected_checksum)
            raise GuardBreach(breach_message(spec, mode, breaches, nothing="switched"), result)

    try:
        written = overwrite_by_switch(
            adapter,
            dataclasses.replace(spec, before_commit=before_commit or spec.before_commit),
            store,
            target,
            inspect=inspect,
        )
    except _Replayed as done:
        log.info(
            "replay of %s for window %s on Spark: staged checksum %s, recorded %s; production unchanged",
            spec.table,
            spec.window.label(),
            done.result.checksum,
            expected_checksum,
        )
        return done.result
    return GuardedResult.committed(
        mode,
        seen["diff"],
        written.checksum,
        written.row_count,
        expected_checksum,
        deleted=written.rows_deleted,
        inserted=written.rows_inserted,
    )

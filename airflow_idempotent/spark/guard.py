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

A Delta or Iceberg table commits a window itself (`guarded_commit`): the rows are staged in a table
of the target's format, checked and diffed there, and committed by ONE REPLACE WHERE (corrective)
or MERGE INTO .. WHEN NOT MATCHED BY SOURCE .. DELETE (reconcile) from the staging, under the
(table, window) lock in the history store. A replay diffs the staging against the table AS OF the
version the window's first write committed (its record names it), so it answers "does this code
reproduce what was written then", even after later corrections. With on_breach="approve" a
breached staging is first copied to a table the approval names (``_idem_apr_``: not swept as a
dead attempt's staging), with the table's version read before the diff (`spark.approval`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from airflow_idempotent.adapters.identifiers import table_parts
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
from airflow_idempotent.spark import delta, iceberg
from airflow_idempotent.spark.adapter import STAGING_PREFIX, SparkAdapter, SparkTableInfo
from airflow_idempotent.spark.approval import keep_stage, read_version
from airflow_idempotent.spark.switch import overwrite_by_switch, store_lock
from airflow_idempotent.spark.writes import commit_stage
from airflow_idempotent.strategies import check_keys, prepare, window_binds
from airflow_idempotent.write_spec import WriteSpec

log = logging.getLogger(__name__)


class _Replayed(Exception):
    """Internal: a replay's staged checksum is known; leave the switch without switching."""

    def __init__(self, result: GuardedResult) -> None:
        super().__init__("replayed")
        self.result = result


def inspect_stage(
    adapter: SparkAdapter,
    conn: Any,
    spec: WriteSpec,
    info: SparkTableInfo,
    stage: str,
    columns: list[str],
    params: dict[str, Any],
    keys: Sequence[str],
    measures: Sequence[str],
    thresholds: Thresholds,
    completeness_sql: exp.Expr | None,
    production: Callable[[exp.Select], exp.Select] | None = None,
) -> tuple[WindowDiff, list[str]]:
    """What the guard checks on staged rows before anything is committed, on every Spark path:
    completeness, repeated or NULL keys and rows outside the window, keys the target holds in
    another window; then the diff against production (`production`: how its queries read it).
    The diff and the key columns as the table spells them."""
    window_only = window_binds(params)
    check_complete(adapter, conn, spec, completeness_sql, params, nothing="committed")
    key_names = [info.column(k, "key column").name for k in keys]
    wanted = [*measures, *thresholds.max_measure_abs_change, *thresholds.max_measure_rel_change]
    measure_names = list(dict.fromkeys(info.column(m, "measure column").name for m in wanted))
    staged = dataclasses.replace(spec, query=adapter.select_columns(stage, columns))
    check_keys(adapter, conn, staged, key_names, window_only)
    check_target_keys(adapter, conn, spec, info, key_names, window_only)
    diff = diff_window(adapter, conn, spec, stage, columns, key_names, measure_names, window_only, production)
    return diff, key_names


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
        diff, _ = inspect_stage(
            adapter, conn, spec, info, stage, columns, params, keys, measures, thresholds, completeness_sql
        )
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
    return GuardedResult.of_commit(mode, seen["diff"], written, expected_checksum)


def stage_prefix(table: str, window_label: str) -> str:
    """The name prefix of every guarded commit's staging of (`table`, window): an attempt holds
    the (table, window) lock from before it creates its staging until it drops it, so a staging
    with this prefix found by the lock's holder is a dead attempt's (SIGKILLed, or its session
    lost), and the holder drops it (`sweep_stages`)."""
    key = hashlib.sha256(f"{table.lower()}|{window_label}".encode()).hexdigest()[:12]
    return f"{STAGING_PREFIX}{key}_"


def drop_stage(adapter: SparkAdapter, conn: Any, stage: str, purge: bool) -> None:
    """Drop a staging table (`purge`: an Iceberg table's files stay on a plain DROP). A failure is
    logged, never raised: it must not hide the error that ended the write (a lost Connect
    session fails this too), and the next guarded write of the window drops it."""
    try:
        conn.sql(adapter.drop_table(stage, purge=purge))
    except Exception as err:
        log.warning("could not drop the staging %s (%s): the window's next guarded write will", stage, err)


def sweep_stages(adapter: SparkAdapter, conn: Any, table: str, prefix: str, purge: bool) -> None:
    """Drop the stagings dead attempts left for this (table, window) (named `prefix`..); called
    under the (table, window) lock, before this attempt stages."""
    catalog, schema, _ = table_parts(table)
    for name in adapter.staging_tables(conn, table, prefix):
        orphan = ".".join(p for p in (catalog, schema, name) if p)
        log.warning("dropping %s, the staging of a guarded write of %s that did not finish", orphan, table)
        drop_stage(adapter, conn, orphan, purge)


def guarded_spark_write(
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
    baseline_version: int | None = None,
    keep_on_breach: str | None = None,
) -> GuardedResult:
    """The guarded write on Spark, by the table's format as the catalog names it: one commit of
    the format's own on Delta and Iceberg (`guarded_commit`; `keep_on_breach` keeps a breached
    staging for an approval, `spark.approval`), the partition switch on parquet (which keeps none:
    refused with `keep_on_breach` before anything is staged)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if spec.periods:  # a replay drops its lookback before it comes here (operators.guarded)
        raise GuardRefusal(
            f"a guarded write to {spec.table} with lookback={len(spec.periods) - 1} on Spark is not "
            "supported yet (an unguarded write with lookback is, on Delta and Iceberg tables): declare "
            "lookback=0 in the guard and the operator, and backfill the days that received late rows. "
            "Nothing was written."
        )
    with adapter.engine.connect() as conn:
        info = adapter.describe(conn, spec.table)
    args = (adapter, spec, keys, measures, thresholds, mode)
    rest = (expected_checksum, completeness_sql, before_commit)
    if delta.is_delta(info) or iceberg.is_iceberg(info):
        return guarded_commit(
            *args,
            *rest,
            store=store,
            target=target,
            baseline_version=baseline_version,
            keep_on_breach=keep_on_breach,
        )
    if keep_on_breach is not None:
        raise GuardRefusal(
            'on_breach="approve" keeps a breached window\'s staged rows in a table until a person decides; '
            f"{spec.table} is a parquet table, whose guarded write (the partition switch) keeps none: on "
            "Spark only parquet tables lack approvals. Nothing was written. Use a Delta Lake or Iceberg "
            "table (CREATE TABLE .. USING delta, or USING iceberg), whose breached staging is kept for "
            'the decision, or declare on_breach="refuse" for this DAG (the default).'
        )
    return guarded_switch(*args, *rest, store=store, target=target)


def guarded_commit(
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
    baseline_version: int | None = None,
    keep_on_breach: str | None = None,
) -> GuardedResult:
    """Stage in the target's format, check and diff there, then one commit from the staging (see
    the module); a breach, the kill switch or a replay commits nothing and drops the staging. With
    `keep_on_breach` (a bare table name), a breach first copies the staged rows to that table,
    beside the target, with the table's version read before the diff (`spark.approval`)."""
    check_guarded_args(spec, mode, keys, expected_checksum, completeness_sql)
    store.migrate()
    with (
        store_lock(store, f"switch:{target}", spec.window, spec.lock_timeout),
        adapter.engine.connect() as conn,
    ):
        info, columns, params = prepare(adapter, conn, spec)  # type: ignore[arg-type]
        assert isinstance(info, SparkTableInfo)
        is_delta = delta.is_delta(info)
        if not is_delta:  # a window the partitioning's periods cut: refused before it is staged
            iceberg.check_fit(info, spec, params)
        window_only = window_binds(params)
        prefix = stage_prefix(spec.table, spec.window.label())
        sweep_stages(adapter, conn, spec.table, prefix, purge=not is_delta)
        # what an approval must still find at its commit: read before the diff, under the lock
        version = None if keep_on_breach is None else read_version(conn, adapter, spec.table, is_delta)
        stage = adapter.staging_name(spec.table, prefix[len(STAGING_PREFIX) :] + uuid.uuid4().hex[:8])
        rows = adapter.typed_rows(info, list(info.columns), spec.query, produced=columns)
        using = "delta" if is_delta else "iceberg"
        conn.sql(f"CREATE TABLE {adapter.qualified(stage)} USING {using} AS {adapter.render(rows)}", params)
        try:
            production = None
            if mode == "replay" and baseline_version is not None:
                version = baseline_version
                production = lambda select: delta.pinned(select, spec.table, version)  # noqa: E731
            every = list(info.columns)
            diff, key_names = inspect_stage(
                adapter,
                conn,
                spec,
                info,
                stage,
                every,
                params,
                keys,
                measures,
                thresholds,
                completeness_sql,
                production,
            )
            breaches = diff.breaches(thresholds)
            if mode == "replay":
                query = adapter.window_checksum(
                    stage, spec.partition_column or "", list(info.columns.values())
                )
                count, total = adapter.execute(conn, query, window_only).one()
                checksum = adapter.checksum_text(int(count), total)
                log.info(
                    "replay of %s for window %s on %s: staged checksum %s, recorded %s (diffed against "
                    "version %s); production unchanged",
                    spec.table,
                    spec.window.label(),
                    using,
                    checksum,
                    expected_checksum,
                    baseline_version,
                )
                return GuardedResult.replayed(mode, diff, checksum, int(count), breaches, expected_checksum)
            if breaches:
                kept = None
                if keep_on_breach is not None:
                    args = (spec, info, stage, keep_on_breach, using, key_names, params, version)
                    kept = keep_stage(adapter, conn, *args)
                result = GuardedResult.refused(mode, diff, breaches, expected_checksum, kept=kept)
                raise GuardBreach(breach_message(spec, mode, breaches, nothing="committed"), result)
            commit = (stage, every, key_names, mode, is_delta, before_commit)
            written = commit_stage(adapter, conn, spec, *commit)
        finally:
            drop_stage(adapter, conn, stage, purge=not is_delta)
    return GuardedResult.of_commit(mode, diff, written, expected_checksum)

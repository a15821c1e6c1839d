"""The shared base of the window-true write operators."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from airflow.sdk import BaseOperator

from airflow_idempotent import __version__
from airflow_idempotent.adapters.base import ColumnKind, EngineAdapter
from airflow_idempotent.adapters.identifiers import table_parts, validate_identifier
from airflow_idempotent.errors import FencedError
from airflow_idempotent.fingerprint import fingerprint
from airflow_idempotent.guard import (
    BackfillIntent,
    GuardConfig,
    check_window_closed,
)
from airflow_idempotent.history.fences import FENCED, AttemptFence
from airflow_idempotent.history.link import StoreLink
from airflow_idempotent.history.spool import SafeHistory
from airflow_idempotent.history.store import DEFAULT_CONN_ID
from airflow_idempotent.hooks.warehouse import WarehouseHook
from airflow_idempotent.identity import AttemptIdentity, CodeIdentity, result_counts
from airflow_idempotent.lint import check_deterministic
from airflow_idempotent.operators.assets import (
    EmitAsset,
    changed_periods,
    emit_mode,
    hold_event,
    release_event,
    target_asset,
    window_event,
)
from airflow_idempotent.operators.guarded import GuardedWriteMixin
from airflow_idempotent.operators.lookback import record_periods
from airflow_idempotent.window import (
    Window,
    check_lookback,
    covered_windows,
    parse_granularity,
    spanning,
    window_from_context,
)
from airflow_idempotent.write_spec import PeriodResult, WriteResult, WriteSpec

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context
    from sqlglot import exp


def _conf_value(context: Context | Mapping[str, Any], key: str) -> str | None:
    """A string value from the run's conf, for the record only (never spliced into SQL)."""
    dag_run = context.get("dag_run")
    conf = getattr(dag_run, "conf", None) or {}
    value = conf.get(key) if isinstance(conf, Mapping) else None
    return str(value)[:64] if isinstance(value, str | int | float) else None


class WindowWriteOperator(GuardedWriteMixin, BaseOperator):
    """Write the rows of a SELECT into `table` for the run's window, safely rerunnable.

    The window comes from the run (data interval, or the logical date plus a declared
    granularity, or the partition key), never from the clock. It is bound into the SELECT as
    `:window_start` / `:window_end` and offered to templates as `{{ window_start }}`,
    `{{ window_end }}` and `{{ window }}`. SQL reading the clock or randomness is refused
    before it runs unless the function is listed in `allow_functions`.

    :param table: target table, `table` or `schema.table` (validated, quoted).
    :param sql: a SELECT (or WITH .. SELECT) producing the rows, or a `.sql` file; templated.
    :param conn_id: Airflow connection of the database (PostgreSQL, MariaDB/MySQL, SQLite, DuckDB,
        or Spark Connect).
    :param partition_column: DATE or TIMESTAMP column of `table` that the window selects.
    :param parameters: extra bound parameters for the SELECT; templated, e.g.
        {"policy_version": "{{ params.policy_version }}"}.
    :param granularity: "hour", "day", "week", "month", "year" or a timedelta: the window of a run
        whose data interval has no width (the default cron timetable) or of a partitioned run.
    :param timezone: the zone the window's days are read in (default UTC).
    :param anchor: "start": the period that contains the logical date; "end": the period that ends at it.
    :param allow_functions: clock or random functions let through the determinism lint, logged.
    :param lock_timeout: seconds to wait for another attempt on the same (table, window).
    :param policy_version: the business rule's version, recorded and part of the fingerprint; templated.
        Defaults to parameters["policy_version"] when that exists.
    :param source_snapshot_sql: a SELECT over the source for the window (e.g. count and
        max(updated_at)); its result is part of the fingerprint; templated, linted, window bound.
    :param skip_if_unchanged: skip the write when the window's last successful write has the same
        fingerprint and the window still holds that write's result; the skip is recorded.
    :param record_history: record the write in the history store (connection `history_conn_id`).
    :param checksum: compute the window's result checksum before commit (needed for history flags).
    :param emit_asset: declare the target table as an outlet asset and put the window, ordinal
        and dataset version in its event's extra. "changed" (default, also True): an event only
        when the window's content changed (a first write, or a checksum other than the window's
        previous recorded version), so a backfill of unchanged windows triggers no downstream DAG;
        with lookback, only the changed periods are named. "always": an event for every
        successful attempt, skips and replays included. False: no outlet.
    :param key_columns: the columns identifying a row: the merge key, and what a guarded backfill
        diffs by (rows added, removed, changed). Required in a guarded DAG.
    :param lookback: late data: also rewrite the N periods of `granularity` before the run's own
        window, in the same transaction (the SQL's window binds are the covered range), and record
        one write per covered period. 0 (default) writes the run's window only.
    """

    template_fields: Sequence[str] = ("sql", "parameters", "policy_version", "source_snapshot_sql")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {"sql": "sql", "parameters": "json"}
    ui_color = "#d9f2e6"
    strategy = "write"

    def __init__(
        self,
        *,
        table: str,
        sql: str,
        conn_id: str = "warehouse",
        partition_column: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        granularity: str | datetime.timedelta | None = None,
        timezone: str = "UTC",
        anchor: Literal["start", "end"] = "start",
        allow_functions: Iterable[str] = (),
        lock_timeout: float = 60.0,
        policy_version: str | None = None,
        source_snapshot_sql: str | None = None,
        skip_if_unchanged: bool = False,
        record_history: bool = True,
        history_conn_id: str = DEFAULT_CONN_ID,
        checksum: bool = True,
        emit_asset: bool | EmitAsset = True,
        key_columns: Sequence[str] | None = None,
        lookback: int = 0,
        **kwargs: Any,
    ) -> None:
        mode = emit_mode(emit_asset)
        if mode is not None:
            kwargs["outlets"] = [*(kwargs.get("outlets") or []), target_asset(conn_id, table)]
        super().__init__(**kwargs)
        table_parts(table)  # the connection's adapter refuses a catalog part it cannot reach
        if partition_column is not None:
            validate_identifier(partition_column, "partition_column")
        parse_granularity(granularity)
        self.lookback = check_lookback(lookback, granularity)
        if self.lookback and partition_column is None:
            raise ValueError(
                f"lookback={self.lookback} needs a partition_column: each covered period is selected, "
                "counted and recorded by it. Give the operator partition_column=<its DATE/TIMESTAMP column>."
            )
        if self.lookback and skip_if_unchanged:
            raise ValueError(
                "skip_if_unchanged cannot be combined with lookback: late rows change the source without "
                "changing the fingerprint, so the skip would keep them out. Drop one of the two."
            )
        self.table = table
        self.sql = sql
        self.conn_id = conn_id
        self.partition_column = partition_column
        self.parameters = dict(parameters or {})
        self.granularity = granularity
        self.timezone = timezone
        self.anchor = anchor
        self.allow_functions = tuple(allow_functions)
        self.lock_timeout = float(lock_timeout)
        self.policy_version = policy_version
        self.source_snapshot_sql = source_snapshot_sql
        self.skip_if_unchanged = skip_if_unchanged
        self.record_history = record_history
        self.history_conn_id = history_conn_id
        self.checksum = checksum
        self.emit_asset: EmitAsset | None = mode
        if isinstance(key_columns, str):
            key_columns = [key_columns]
        self.key_columns: list[str] = [validate_identifier(k, "key column") for k in key_columns or ()]
        if skip_if_unchanged and not (record_history and checksum):
            raise ValueError(
                "skip_if_unchanged needs record_history=True and checksum=True: it compares with history."
            )
        self.guard_config()  # a guarded DAG's operator must read its window as the guard does

    def window(self, context: Context | Mapping[str, Any]) -> Window:
        """The run's window: the one place it is derived (see airflow_idempotent.window)."""
        return window_from_context(context, self.granularity, self.timezone, self.anchor)

    def covered(self, context: Context | Mapping[str, Any]) -> list[Window]:
        """The periods this run rewrites, oldest first: its window and the `lookback` periods
        before it (`window.covered_windows`, the one rule the preview and the guard use too)."""
        return covered_windows(self.window(context), self.lookback, self.granularity)

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        """Offer the window to templates before they render (with lookback, the covered range,
        which is also what :window_start / :window_end bind)."""
        context.update(spanning(self.covered(context)).template_vars())  # type: ignore[typeddict-item]
        super().render_template_fields(context, jinja_env)

    def execute(self, context: Context) -> dict[str, Any]:
        return self.execute_with(context, None)

    def execute_with(self, context: Context, adapter: EngineAdapter | None) -> dict[str, Any]:
        """The write of `execute`; `adapter` is the connection's when the caller has built it
        already (MergeOperator refuses an engine without merge first), so one engine serves."""
        guard = self.guard_config()  # first: a task whose window differs from the guard's writes nothing
        if self.emit_asset == "changed":  # no event unless `emit_asset_event` finds the window changed
            self.outlets = hold_event(self.outlets, target_asset(self.conn_id, self.table))
        periods = self.covered(context)  # a run without a window fails before any connection
        identity = AttemptIdentity.from_context(context, self)
        if adapter is None:
            adapter = WarehouseHook(conn_id=self.conn_id).adapter
        # an embedded file closes while the write is recorded, and is closed (its lock files
        # released) when the block ends, before the task does
        with adapter.closes_late():
            adapter.open_early()  # the write's connection opens while the checks below run
            try:
                return self.execute_attempt(context, adapter, guard, periods, identity)
            finally:
                adapter.close_early()  # unless the write's transaction took it

    def execute_attempt(
        self,
        context: Context,
        adapter: EngineAdapter,
        guard: GuardConfig | None,
        periods: Sequence[Window],
        identity: AttemptIdentity,
    ) -> dict[str, Any]:
        """`execute_with` once the window and adapter are known: lint, fingerprint, fence, write."""
        spec = self.write_spec(context, adapter, periods)
        window = spec.window  # with lookback, the span of the covered periods
        policy = self.effective_policy_version()
        digest, parts = fingerprint(self.fingerprint_parts(adapter, spec, policy, identity.code))
        history = SafeHistory(self.history_conn_id) if self.record_history else None
        target = f"{self.conn_id}:{self.table}"
        semantics = _conf_value(context, "semantics")
        intent: BackfillIntent | None = None
        backfill = identity.run_type == "backfill"
        if guard is not None and backfill:
            # defence in depth: the API server's middleware checked the same conf and windows
            intent = self.backfill_intent(context)
            check_window_closed(window)
            self.check_backfill_size(history, guard, identity.dag_id, identity.run_id)
        # a retry swapping an earlier try's approval checks the switch against the approval's time,
        # as that approval's own swap does (`swap_decided`): a stop set after a person approved
        # does not undo the decision; if the approval no longer applies, `guarded_execute` checks here
        carrying = self.carries_approval(guard, intent, adapter, spec, identity, history, target)
        store = history.store if history is not None else None
        fence = AttemptFence(store, identity, target, spec.lock_windows)

        recording = StoreLink(store)  # the checks before commit, then the record (history.link)

        def switch(link: StoreLink, when: str) -> None:  # a guarded backfill's check fails closed
            shut = intent is not None
            self.check_kill_switch(history, identity.dag_id, backfill, fail_closed=shut, when=when, link=link)

        def before_commit() -> None:
            with recording.checks(fence):  # the fence's check on the link too
                switch(recording, "before commit")
                fence.check()  # the last word: a newer attempt of this task instance started writing

        spec = dataclasses.replace(spec, before_commit=before_commit, attempt=identity.label())
        try:
            with StoreLink(store) as link, link.checks(fence):  # the switch read, the fence's raise
                if not carrying:
                    switch(link, "before writing")
                fence.take()
            return self.fenced_execute(
                context,
                adapter,
                spec,
                guard,
                intent,
                identity,
                history,
                target,
                policy,
                digest,
                parts,
                switch_checked=not carrying,
                recording=recording,
            )
        except FencedError as err:
            if history is not None:
                for period in spec.lock_windows:
                    history.record(
                        identity.write_record(
                            target,
                            period,
                            self.strategy,
                            FENCED,
                            digest,
                            parts,
                            policy,
                            semantics,
                            message=str(err),
                        )
                    )
            self.log.error("%s", err)
            raise
        finally:
            recording.discard()  # unless the record took it

    def fenced_execute(
        self,
        context: Context,
        adapter: EngineAdapter,
        spec: WriteSpec,
        guard: GuardConfig | None,
        intent: BackfillIntent | None,
        identity: AttemptIdentity,
        history: SafeHistory | None,
        target: str,
        policy: str | None,
        digest: str,
        parts: str,
        switch_checked: bool = True,
        recording: StoreLink | None = None,
    ) -> dict[str, Any]:
        """The write of `execute_with` once the attempt holds its fence: guarded, skipped or written
        (`switch_checked` False: the kill switch was left to the approval this try carries;
        `recording`: the check before commit's connection, which the write's record takes)."""
        window = spec.window
        semantics = _conf_value(context, "semantics")
        if guard is not None and (intent is not None or guard.always_stage):
            return self.guarded_execute(
                context,
                adapter,
                spec,
                guard,
                intent,
                identity,
                history,
                target,
                policy,
                switch_checked=switch_checked,
            )

        if self.skip_if_unchanged and history is not None:
            skipped = self.try_skip(adapter, spec, history, target, digest, identity.code)
            if skipped is not None:
                record = identity.write_record(
                    target,
                    window,
                    self.strategy,
                    "skipped",
                    digest,
                    parts,
                    policy,
                    semantics,
                    row_count=skipped.get("row_count"),
                    checksum=skipped.get("checksum"),
                    message=f"skipped: same fingerprint as write #{skipped['ordinal']} ({skipped['run_id']})",
                )
                history.record(record)
                self.log.info(
                    "skipped %s for window %s: same fingerprint %s as write #%s and the window is unchanged",
                    self.table,
                    window.label(),
                    digest[:12],
                    skipped["ordinal"],
                )
                return {
                    "strategy": self.strategy,
                    "table": self.table,
                    "window": window.label(),
                    "skipped": True,
                    "fingerprint": digest,
                    "checksum": skipped.get("checksum"),
                }

        result = self.write(adapter, spec)
        out = result.as_dict() | {"fingerprint": digest, "policy_version": policy}
        self.log.info(
            "%s of %s for window %s: %d deleted, %d inserted, %d updated; checksum %s, fingerprint %s",
            result.strategy,
            result.table,
            result.window,
            result.rows_deleted,
            result.rows_inserted,
            result.rows_updated,
            result.checksum,
            digest[:12],
        )
        if history is not None and result.periods:
            out |= record_periods(  # each period's record names the table format's commit (Delta, Iceberg)
                self,
                history,
                identity,
                target,
                result.periods,
                digest,
                parts,
                policy,
                semantics,
                window,
                note=result_counts(result).get("message"),
            )
        elif history is not None:
            record = identity.write_record(
                target,
                window,
                self.strategy,
                "written",
                digest,
                parts,
                policy,
                semantics,
                source_rows=result.source_rows,
                **result_counts(result),
            )
            stored = history.record(record, recording)
            if stored is not None:
                out |= stored.summary()
                if stored.nondeterministic:
                    self.log.warning(
                        "NON-DETERMINISTIC: window %s of %s has the same fingerprint as an earlier write "
                        "but a different result (checksum %s, before %s): the SQL or its source is not "
                        "reproducible",
                        window.label(),
                        target,
                        result.checksum,
                        stored.previous_checksum,
                    )
        self.emit_asset_event(context, window, out)
        return out

    def write_spec(
        self,
        context: Context | Mapping[str, Any],
        adapter: EngineAdapter,
        periods: Sequence[Window] | None = None,
    ) -> WriteSpec:
        """What this (rendered) task writes for the run: its SQL linted for the adapter's dialect
        (clock and randomness refused), its window (with lookback, the span of the covered periods,
        each of which is locked, counted and recorded), the bound parameters. The one place a task
        becomes a write: `execute` and the rerun preview (`airflow_idempotent.preview`) both call
        it, so a preview renders exactly what a run would write. `periods`: `covered(context)`,
        when the caller has them already (the window is read, and logged, once)."""
        if periods is None:
            periods = self.covered(context)
        return WriteSpec(
            table=self.table,
            query=check_deterministic(self.sql, adapter.dialect, self.allow_functions),
            window=spanning(periods),
            partition_column=self.partition_column,
            params=self.parameters,
            lock_timeout=self.lock_timeout,
            checksum=self.checksum,
            periods=tuple(periods) if self.lookback else (),
        )

    def period_counts(self, period: PeriodResult) -> dict[str, Any]:
        """What a covered period's record says was changed in it (the strategy knows; none here)."""
        return {}

    def completeness_check(self, guard: GuardConfig | None, adapter: EngineAdapter) -> exp.Expression | None:
        """The guard's declared completeness SELECT, linted like the task's own SQL, or None."""
        if guard is None or not guard.completeness_sql:
            return None
        return check_deterministic(guard.completeness_sql, adapter.dialect, self.allow_functions)

    def guard_config(self) -> GuardConfig | None:
        """The guard the DAG declares (its declared param default, never a run's conf), or None.

        Refuses (GuardRefusal) when this operator reads its window otherwise than the guard does:
        called when the operator is built in its DAG (parse time) and again before it writes.
        """
        if not self.has_dag():
            return None
        guard = GuardConfig.of_params(getattr(self.dag, "params", None))
        if guard is not None:
            guard.check_operator(self.task_id, self.granularity, self.timezone, self.anchor, self.lookback)
        return guard

    def effective_policy_version(self) -> str | None:
        policy = (
            self.policy_version if self.policy_version is not None else self.parameters.get("policy_version")
        )
        return None if policy is None else str(policy)

    def fingerprint_parts(
        self, adapter: EngineAdapter, spec: WriteSpec, policy: str | None, code: CodeIdentity | None = None
    ) -> dict[str, Any]:
        """Everything that defines "the same write" of this window (see airflow_idempotent.fingerprint).

        `code`: the DAG version and bundle the attempt runs under, when Airflow names them (a write
        outside Airflow has none, and its fingerprint is what it was before versions were recorded).
        """
        parts: dict[str, Any] = {
            "sql": adapter.render_text(self.sql),  # spec.query's rendering (write_spec parses self.sql)
            "parameters": dict(spec.params),
            "window": [spec.window.start.isoformat(), spec.window.end.isoformat()],
            "strategy": self.strategy,
            "target": f"{self.conn_id}:{self.table}",
            "partition_column": self.partition_column,
            "package_version": __version__,
            "policy_version": policy,
        }
        parts.update(self.strategy_parts())
        if code is not None and any(code.parts().values()):
            parts["code"] = code.parts()
        if self.source_snapshot_sql:
            parts["source_snapshot"] = self.source_snapshot(adapter, spec)
        return parts

    def strategy_parts(self) -> dict[str, Any]:
        return {}

    def source_snapshot(self, adapter: EngineAdapter, spec: WriteSpec) -> list[list[str]]:
        """The user's snapshot query over the source window, as text, e.g. [["2000", "2026-08-25 23:59"]]."""
        assert self.source_snapshot_sql is not None
        snap = check_deterministic(self.source_snapshot_sql, adapter.dialect, self.allow_functions)
        kind: ColumnKind = "timestamptz"
        with adapter.engine.connect() as conn:
            if self.partition_column is not None:
                kind = (
                    adapter.describe(conn, self.table).column(self.partition_column, "partition_column").kind
                )
            params = {**spec.params, **adapter.window_params(spec.window, kind)}
            rows = adapter.execute(conn, snap, params).all()
        return [[str(v) for v in row] for row in rows]

    def try_skip(
        self,
        adapter: EngineAdapter,
        spec: WriteSpec,
        history: SafeHistory,
        target: str,
        digest: str,
        code: CodeIdentity | None = None,
    ) -> dict[str, Any] | None:
        """The last write to reuse, if it has this fingerprint and the window still holds its result
        (`code`: the DAG version this attempt runs, named in the log when it is a new one)."""
        last = history.last_write(target, spec.window)
        if last is not None and code is not None and last.get("dag_version_id") != code.dag_version_id:
            self.log.info(
                "DAG version %s differs from %s, which wrote #%s of window %s: writing again",
                code.dag_version_id,
                last.get("dag_version_id") or "unrecorded",
                last["ordinal"],
                spec.window.label(),
            )
        if last is None or last.get("fingerprint") != digest or not last.get("checksum"):
            return None
        assert spec.partition_column is not None
        with adapter.engine.connect() as conn:
            info = adapter.describe(conn, spec.table)
            kind = info.column(spec.partition_column, "partition_column").kind
            query = adapter.window_checksum(spec.table, spec.partition_column, list(info.columns.values()))
            count, total = adapter.execute(conn, query, adapter.window_params(spec.window, kind)).one()
        if adapter.checksum_text(int(count), total) != last["checksum"]:
            self.log.info(
                "window %s changed since write #%s: writing again", spec.window.label(), last["ordinal"]
            )
            return None
        return last

    def emit_asset_event(
        self, context: Context | Mapping[str, Any], window: Window, out: Mapping[str, Any]
    ) -> None:
        """Tell downstream DAGs and lineage which window of the target changed, and to which version;
        with emit_asset="changed", nothing when no covered period's content changed."""
        # for the OpenLineage provider's listener (it cannot pull XCom)
        self.lineage_result: dict[str, Any] = dict(out)
        if self.emit_asset is None:
            return
        asset = target_asset(self.conn_id, self.table)
        changed = changed_periods(out) if self.emit_asset == "changed" else None
        if changed == []:
            self.log.info(
                "no asset event for window %s of %s: its content is unchanged (dataset version %s, "
                "checksum %s); emit_asset='always' would emit one",
                window.label(),
                self.table,
                out.get("dataset_version"),
                out.get("checksum"),
            )
            return
        self.outlets = release_event(self.outlets, asset)
        if "outlet_events" in context:
            covered = self.covered(context) if self.lookback else None
            window_event(context, asset, self.strategy, window, out, covered, self.lookback, changed)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """What the attempt read and wrote, for the OpenLineage provider (see airflow_idempotent.lineage)."""
        from airflow_idempotent.lineage import operator_lineage

        return operator_lineage(self, task_instance, completed=True)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """The same lineage for a failed attempt, without statistics: nothing was written."""
        from airflow_idempotent.lineage import operator_lineage

        return operator_lineage(self, task_instance, completed=False)

    def write(self, adapter: EngineAdapter, spec: WriteSpec) -> WriteResult:
        raise NotImplementedError

"""The guarded half of `WindowWriteOperator`: a guarded DAG's write is staged, diffed, checked
against the stop conditions, then swapped, reconciled or (replay) only compared (`guard.write`;
on Spark `spark.guard`), after the backfill's size, the kill switch and the throttle allow it.
Kept apart from the operator's base so each concept has one module."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from airflow.sdk.exceptions import AirflowRescheduleException

from airflow_idempotent.fingerprint import fingerprint
from airflow_idempotent.guard import BackfillIntent, GuardConfig, GuardRefusal, killswitch, sizes
from airflow_idempotent.history import approvals
from airflow_idempotent.history.link import StoreLink
from airflow_idempotent.history.spool import SafeHistory
from airflow_idempotent.history.store import utcnow
from airflow_idempotent.identity import AttemptIdentity, table_version, with_counts
from airflow_idempotent.operators.approval import ApprovalMixin
from airflow_idempotent.operators.lookback import record_periods
from airflow_idempotent.window import Window
from airflow_idempotent.write_spec import PeriodResult, WriteSpec

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_idempotent.adapters.base import EngineAdapter


#: What a guarded write does to production, by its run's semantics (a scheduled run: corrective).
MODES: dict[str, Literal["swap", "reconcile", "replay"]] = {
    "corrective": "swap",
    "reconcile": "reconcile",
    "replay": "replay",
}


def may_carry(guard: GuardConfig, mode: str, spec: WriteSpec) -> bool:
    """Whether a guarded write first looks for an approval an earlier try of it got and could not
    swap (`swap_carried`): on_breach="approve", not a replay, one window."""
    return guard.on_breach == "approve" and mode != "replay" and not spec.periods


def run_conf(context: Context | Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The run's conf when it is a mapping (what a backfill's intent is read from), else None."""
    conf = getattr(context.get("dag_run"), "conf", None)
    return conf if isinstance(conf, Mapping) else None


class GuardedWriteMixin(ApprovalMixin):
    """The guarded write of `WindowWriteOperator` (which provides the attributes declared here)."""

    task_id: str
    dag: Any
    lookback: int
    period_counts: Callable[[PeriodResult], dict[str, Any]]
    fingerprint_parts: Callable[..., dict[str, Any]]
    completeness_check: Callable[..., Any]
    emit_asset_event: Callable[..., None]

    def backfill_intent(self, context: Context | Mapping[str, Any]) -> BackfillIntent:
        """What this guarded backfill's run declares in its conf (`BackfillIntent.from_conf`, the
        middleware's rule), or GuardRefusal saying what to fix."""
        return BackfillIntent.from_conf(run_conf(context), declared_params=set(self.dag.params))

    def check_backfill_size(
        self, history: SafeHistory | None, guard: GuardConfig, dag_id: str, run_id: str
    ) -> None:
        """Refuse when this backfill run's backfill is over the cap without the exact approval, or
        its size was never recorded (`guard.sizes`): a backfill created behind the guard writes
        nothing. A store that cannot answer refuses too (fail closed)."""
        store = (history or SafeHistory(self.history_conn_id)).store
        try:
            size = store.backfill_size(dag_id, run_id)
        except Exception as err:
            raise GuardRefusal(
                f"the backfill's size cannot be checked (history store {self.history_conn_id!r}: "
                f"{type(err).__name__}): a guarded backfill does not write blind. Bring the store back "
                "and clear the task to retry."
            ) from err
        sizes.check_size(guard, size, dag_id, run_id)

    def check_kill_switch(
        self,
        history: SafeHistory | None,
        dag_id: str,
        backfill: bool,
        fail_closed: bool,
        when: str,
        set_before: datetime.datetime | None = None,
        link: StoreLink | None = None,
    ) -> None:
        """Refuse if a kill switch covers this write (with `set_before`, one set before that moment).
        A store that cannot answer stops a guarded backfill (fail closed) but not a scheduled run
        (the history store must never block it). `link`: the moment's connection, shared with the
        fence (`history.link`)."""
        if history is None:
            return
        try:
            conn = link.connection() if link is not None else None
            killswitch.check(history.store, dag_id, backfill, when, set_before, conn)
            if link is not None:
                link.after_read()
        except killswitch.KillSwitchTripped:
            raise
        except Exception as err:
            if link is not None:  # the fence's check opens a connection of its own
                link.discard()
            if fail_closed:
                raise GuardRefusal(
                    f"{when}: the kill switch cannot be checked (history store {self.history_conn_id!r}: "
                    f"{type(err).__name__}): a guarded backfill does not write blind. Bring the store back "
                    "and clear the task to retry."
                ) from err
            self.log.warning("kill switch not checked %s (history store unavailable: %s)", when, err)

    def carries_approval(
        self,
        guard: GuardConfig | None,
        intent: BackfillIntent | None,
        adapter: EngineAdapter,
        spec: WriteSpec,
        identity: AttemptIdentity,
        history: SafeHistory | None,
        target: str,
    ) -> bool:
        """Whether this try finds an approval of its window that an earlier try got and could not
        swap (`approvals.SWAP_RETRY`), which `guarded_execute` swaps without asking again."""
        if guard is None or history is None or (intent is None and not guard.always_stage):
            return False
        mode = MODES[intent.semantics if intent is not None else "corrective"]
        if not may_carry(guard, mode, spec):
            return False
        window = spec.window
        return approvals.carried(history.store, identity, target, window.start, window.end) is not None

    def guarded_execute(
        self,
        context: Context,
        adapter: EngineAdapter,
        spec: WriteSpec,
        guard: GuardConfig,
        intent: BackfillIntent | None,
        identity: AttemptIdentity,
        history: SafeHistory | None,
        target: str,
        policy: str | None,
        switch_checked: bool = True,
    ) -> dict[str, Any]:
        """Stage, diff, check the stop conditions, then swap, reconcile, or (replay) only compare.
        `switch_checked` False: the caller left the kill switch to the approval this try carries
        (`carries_approval`); checked here as before writing if that approval no longer applies."""
        # looked up when called, so a test can wrap guarded_write (the crash matrix does)
        from airflow_idempotent.guard.results import GuardBreach
        from airflow_idempotent.guard.write import guarded_write

        if not self.key_columns:
            raise GuardRefusal(
                f"{self.task_id} writes a guarded DAG's table, which is diffed by key: give the operator "
                "key_columns=[...] (e.g. ['sale_id'])."
            )
        if history is None:
            raise GuardRefusal(
                "a guarded write records its diff: record_history must stay on in a guarded DAG."
            )
        if intent is not None and guard.throttle_per_hour:
            self.throttle(history, identity.dag_id, guard.throttle_per_hour)
        semantics = intent.semantics if intent is not None else "corrective"
        mode = MODES[semantics]
        if mode == "replay" and spec.periods:
            # a replay reproduces the run's own recorded write and changes nothing: no lookback in it
            spec = dataclasses.replace(spec, window=spec.periods[-1], periods=())
        expected: str | None = None
        baseline: int | None = None  # the table format's version the window's first write committed
        if semantics == "replay":
            original = self.original_write(history, target, spec.window)
            policy = original.get("policy_version") or policy
            expected = original.get("checksum")
            baseline = table_version(original.get("message"))
            if policy is not None and "policy_version" in spec.params:
                spec = dataclasses.replace(spec, params={**spec.params, "policy_version": policy})
        elif intent is not None and intent.policy_version is not None:
            policy = intent.policy_version
        digest, parts = fingerprint(self.fingerprint_parts(adapter, spec, policy, identity.code))
        thresholds = guard.thresholds.merged(intent.thresholds if intent is not None else None)
        completeness = self.completeness_check(guard, adapter)

        def record(status: str, result: Any, message: str | None = None) -> Any:
            if spec.periods:  # lookback: one record per covered period, each with the range's diff
                done = result.periods or [PeriodResult(p, None, None, None) for p in spec.periods]
                return record_periods(
                    self,
                    history,
                    identity,
                    target,
                    done,
                    digest,
                    parts,
                    policy,
                    semantics,
                    spec.window,
                    status=status,
                    counts=False,
                    diff=json.dumps(result.diff.to_json(), default=str),
                    note=with_counts(message, result)["message"],
                )
            return history.record(
                identity.write_record(
                    target,
                    spec.window,
                    self.strategy,
                    status,
                    digest,
                    parts,
                    policy,
                    semantics,
                    diff=json.dumps(result.diff.to_json(), default=str),
                    **with_counts(message, result),
                )
            )

        write: Any = guarded_write
        if may_carry(guard, mode, spec):  # an earlier try's approval, unswapped
            carried = self.swap_carried(context, adapter, identity, history, target, spec, digest)
            if carried is not None:
                return carried
        if not switch_checked:  # the carried approval no longer applies: this is a write of its own
            backfill = identity.run_type == "backfill"
            self.check_kill_switch(
                history, identity.dag_id, backfill, fail_closed=intent is not None, when="before writing"
            )
        if not adapter.supports_transactions:  # Spark: by the table's format (spark.guard)
            from airflow_idempotent.spark.guard import guarded_spark_write

            write = functools.partial(
                guarded_spark_write, store=history.store, target=target, baseline_version=baseline
            )
        if guard.on_breach == "approve" and mode != "replay":  # a breach keeps its rows for a person
            write = self.approval_write(adapter, write, identity, target, spec.window, history)
        try:
            result = write(
                adapter,
                spec,
                self.key_columns,
                list(guard.measures),
                thresholds,
                mode,
                expected_checksum=expected,
                completeness_sql=completeness,
                before_commit=spec.before_commit,
            )
        except GuardBreach as breach:
            if breach.result.kept is not None:  # on_breach="approve": parks the task for a decision
                self.await_approval(
                    context, guard, breach, identity, history, target, spec, semantics, policy
                )
            reason = f"{spec.window.label()}: {'; '.join(breach.result.breaches)}"
            record("refused", breach.result, f"stop condition: {reason}")
            if intent is not None:
                killswitch.set_switch(history.store, "backfill", identity.dag_id, f"guard breach on {reason}")
            raise
        if mode == "replay":
            status = "replayed" if result.replay_matches else "diverged"
            message = (
                f"replay reproduced the recorded checksum {expected}"
                if result.replay_matches
                else f"replay DIVERGES: recorded {expected}, recomputed {result.checksum}"
            )
            record(status, result, message)
            (self.log.info if result.replay_matches else self.log.warning)(
                "%s (production unchanged)", message
            )
            return {
                "strategy": self.strategy,
                "window": spec.window.label(),
                "semantics": semantics,
                "replay_matches": result.replay_matches,
                "checksum": result.checksum,
                "expected_checksum": expected,
                "diff": result.diff.to_json(),
            }
        stored = record("written", result)
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "table": self.table,
            "window": spec.window.label(),
            "semantics": semantics,
            "policy_version": policy,
            "fingerprint": digest,
            "rows_deleted": result.rows_deleted,
            "rows_inserted": result.rows_inserted,
            "rows_updated": result.rows_updated,
            "row_count": result.row_count,
            "checksum": result.checksum,
            "diff": result.diff.to_json(),
        }
        if isinstance(stored, dict):  # lookback: the periods' records
            out |= stored
        elif stored is not None:
            out |= stored.summary()
        self.log.info(
            "guarded %s of %s for window %s: diff %s", semantics, self.table, spec.window.label(), out["diff"]
        )
        self.emit_asset_event(context, spec.window, out)
        return out

    def throttle(self, history: SafeHistory, dag_id: str, per_hour: int) -> None:
        """At most `per_hour` windows of a backfill per hour, so it cannot starve the nightly run."""
        now = utcnow()
        recent = history.store.writes_since(dag_id, "backfill", now - datetime.timedelta(hours=1))
        if len(recent) >= per_hour:
            resume_at = recent[-per_hour] + datetime.timedelta(hours=1)
            self.log.info(
                "throttled: %d backfill windows of %s written in the last hour (limit %d); rescheduled to %s",
                len(recent),
                dag_id,
                per_hour,
                resume_at.isoformat(),
            )
            raise AirflowRescheduleException(resume_at)

    def original_write(self, history: SafeHistory, target: str, window: Window) -> dict[str, Any]:
        """The first write recorded for the window: what a replay must reproduce."""
        writes = [
            w
            for w in history.store.writes(target=target, window_start=window.start, window_end=window.end)
            if w["status"] == "written"
        ]
        if not writes:
            raise GuardRefusal(
                f"nothing is recorded for {target} window {window.label()}: a replay reproduces a recorded "
                "write. Use semantics corrective to compute it for the first time."
            )
        return min(writes, key=lambda w: w["ordinal"])

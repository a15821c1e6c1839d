"""Human approval of a breached guarded window, in the operator (on_breach="approve").

The guarded write kept the breached window's staged rows (`guard.write.KeptStage`); here the
operator records the pending approval in history, asks through Airflow's own human-in-the-loop
machinery (a HITL detail on this task instance: Airflow's required actions page and REST API,
options Approve / Reject, a comment field, the guard's timeout with Reject as the default), and
parks the task. Airflow resumes it in `approval_complete` with the response:

- Approve: the decision (who, when, comment) is recorded first, then `guard.approval.swap_approved`
  swaps exactly the approved rows if neither they nor production's window changed;
- Reject: recorded, this window refused (its kept rows dropped); the backfill's other windows go on;
- timeout (nobody decided): recorded, the window refused, and the backfill's kill switch tripped.

An approval is swapped unless a kill switch set before the person's response covers it.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from airflow.sdk.exceptions import AirflowFailException

from airflow_idempotent.fingerprint import fingerprint
from airflow_idempotent.guard import killswitch
from airflow_idempotent.guard.approval import (
    APPROVE,
    COMMENT,
    OPTIONS,
    REJECT,
    StaleApproval,
    drop_kept,
    request_body,
    subject,
    swap_approved,
)
from airflow_idempotent.guard.config import GuardConfig
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.results import GuardBreach, KeptStage
from airflow_idempotent.history import approvals
from airflow_idempotent.history.approvals import PendingApproval
from airflow_idempotent.history.fences import AttemptFence
from airflow_idempotent.history.link import StoreLink
from airflow_idempotent.history.spool import SafeHistory
from airflow_idempotent.history.store import utcnow
from airflow_idempotent.identity import AttemptIdentity, with_counts

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_idempotent.adapters.base import EngineAdapter
    from airflow_idempotent.window import Window
    from airflow_idempotent.write_spec import WriteSpec


def kept_stage_name(identity: AttemptIdentity, target: str, window_label: str) -> str:
    """The kept stage of one attempt's window: one name per attempt, so an orphan is traceable."""
    key = f"{identity.dag_id}|{identity.run_id}|{identity.task_id}|{identity.map_index}|"
    key += f"{identity.try_number}|{target}|{window_label}"
    return f"_idem_apr_{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def versioned(kept: KeptStage) -> dict[str, Any]:
    """What an approval records of the table version its diff read (a Delta or Iceberg table):
    `table_version` in its diff, which the approved commit must still find."""
    return {"table_version": kept.table_version} if kept.versioned else {}


def _responder(event: Mapping[str, Any]) -> str | None:
    user = event.get("responded_by_user")
    if isinstance(user, Mapping):
        return str(user.get("name") or user.get("id") or "") or None
    return None


def _comment(event: Mapping[str, Any]) -> str | None:
    value = (event.get("params_input") or {}).get(COMMENT)
    text = str(value).strip() if value is not None else ""
    return text[:2000] or None


class ApprovalMixin:
    """The approval half of `WindowWriteOperator` (kept apart: one module per concept)."""

    # provided by WindowWriteOperator / BaseOperator
    key_columns: list[str]
    conn_id: str
    table: str
    strategy: str
    history_conn_id: str
    log: Any

    def approval_write(
        self,
        adapter: EngineAdapter,
        write: Any,
        identity: AttemptIdentity,
        target: str,
        window: Window,
        history: SafeHistory,
    ) -> Any:
        """The guarded write that keeps a breached window's rows in a table of its own (every engine
        can; Spark refuses a parquet table by its format, when its write sees it, before anything
        is written).
        Older attempts' requests for this window still pending are superseded once this write has
        decided (written, or breached with rows of its own to decide on), their kept rows dropped
        (a cleared or hand-marked task is never resumed to drop them itself); a write that fails
        before that (warehouse down, a refusal) leaves them pending, still answerable."""
        keep = kept_stage_name(identity, target, window.label())

        def supersede_older() -> None:
            for table in approvals.supersede(history.store, identity, target, window.start, window.end):
                drop_kept(adapter, table)
                self.log.warning(
                    "superseded an older pending approval of %s: dropped its kept rows %s",
                    window.label(),
                    table,
                )

        def write_then_supersede(*args: Any, **kwargs: Any) -> Any:
            try:
                result = write(*args, keep_on_breach=keep, **kwargs)
            except GuardBreach as breach:
                if breach.result.kept is not None:
                    supersede_older()
                raise
            supersede_older()
            return result

        return write_then_supersede

    def await_approval(
        self,
        context: Context,
        guard: GuardConfig,
        breach: GuardBreach,
        identity: AttemptIdentity,
        history: SafeHistory,
        target: str,
        spec: WriteSpec,
        semantics: str,
        policy: str | None,
    ) -> None:
        """Record the pending approval, create the HITL request for this task instance, park."""
        kept = breach.result.kept
        assert kept is not None
        now = utcnow()
        timeout = datetime.timedelta(hours=guard.approval_timeout_hours)
        pending = PendingApproval(
            target=target,
            window_label=spec.window.label(),
            status=approvals.PENDING,
            mode=breach.result.mode,
            semantics=semantics,
            policy_version=policy,
            stage_table=kept.table,
            stage_rows=kept.rows,
            stage_checksum=kept.checksum,
            target_rows=kept.target_rows,
            target_checksum=kept.target_checksum,
            diff={**breach.result.diff.to_json(), "samples": kept.samples, **versioned(kept)},
            breaches=list(breach.result.breaches),
            requested_at=now,
            expires_at=now + timeout,
        )
        approvals.request(history.store, identity, spec.window.start, spec.window.end, pending)
        self.log.warning(
            "%s; waiting up to %s for an approval in Airflow's required actions (staged rows kept in %s)",
            breach,
            timeout,
            kept.table,
        )
        ask_for_approval(context, self, pending, timeout)

    def approval_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Resume with a person's response (or the timeout): swap what was approved, or refuse."""
        event = event or {}
        self.guard_config()  # type: ignore[attr-defined]  # a task whose window differs is refused
        identity = AttemptIdentity.from_context(context, self)  # type: ignore[arg-type]
        history = SafeHistory(self.history_conn_id)
        store = history.store
        pending = approvals.of_attempt(store, identity)
        if pending is not None and pending.status == approvals.SUPERSEDED:
            raise GuardRefusal(
                f"{identity.task_id} resumed for an approval of {pending.window_label}, but a newer attempt "
                f"wrote that window ({pending.comment}): its kept rows are gone and nothing was swapped. "
                "Answer the newer attempt's request instead."
            )
        if pending is None or pending.status != approvals.PENDING:
            raise GuardRefusal(
                f"{identity.task_id} resumed for an approval, but history holds no pending approval of "
                f"run {identity.run_id} try {identity.try_number}: nothing was swapped. Clear the task "
                "to diff the window again."
            )
        from airflow_idempotent.hooks.warehouse import WarehouseHook

        adapter = WarehouseHook(conn_id=self.conn_id).adapter
        spec = self.write_spec(context, adapter)  # type: ignore[attr-defined]
        backfill = identity.run_type == "backfill"
        by, comment = _responder(event), _comment(event)
        chosen = list(event.get("chosen_options") or [])
        if "error" in event or event.get("timedout") or chosen != [APPROVE]:
            self.refuse_decided(event, identity, history, spec, pending, by, comment, backfill, adapter)
        # the approval is recorded before anything is swapped (and a store that cannot take it stops here)
        approved_at = approvals.decide(store, identity, approvals.APPROVED, by, comment, _responded_at(event))
        return self.swap_decided(
            context, identity, identity, history, adapter, spec, pending, approved_at, by, comment
        )

    def swap_carried(
        self,
        context: Context,
        adapter: EngineAdapter,
        identity: AttemptIdentity,
        history: SafeHistory,
        target: str,
        spec: WriteSpec,
        digest: str,
    ) -> dict[str, Any] | None:
        """A retry whose earlier try was approved but failed to swap for a reason that may pass
        (`approvals.SWAP_RETRY`): swap the rows the person approved, without asking again, when
        this try runs the approved code (the same fingerprint: SQL, parameters, policy, DAG
        version); `swap_approved` then checks the kept rows and production's window are as
        diffed. A kill switch stops it only if set before the approval was recorded, as it stops
        the approval's first swap (`swap_decided`; the retry's check before writing is left to
        this one). None when there is nothing to carry, or it no longer applies (its kept rows
        dropped, recorded): the write then diffs again and asks a person."""
        store = history.store
        found = approvals.carried(store, identity, target, spec.window.start, spec.window.end)
        if found is None:
            return None
        earlier, pending = found
        keys = {"dag_id": earlier.dag_id, "run_id": earlier.run_id, "task_id": earlier.task_id}
        recorded = store.writes(
            **keys, map_index=earlier.map_index, try_number=earlier.try_number, target=target
        )
        if not recorded or recorded[-1].get("fingerprint") != digest:
            why = "its SQL, parameters, policy or DAG version differ from the approved try's"
            approvals.mark(store, earlier, approvals.NOT_SWAPPED, pending.comment)
            drop_kept(adapter, pending.stage_table)
            self.log.warning(
                "the approval of %s by try %s is not carried over: %s; diffing again",
                pending.window_label,
                earlier.try_number,
                why,
            )
            return None
        self.log.info(
            "try %s of %s was approved by %s and its swap failed: swapping the approved rows %s",
            earlier.try_number,
            pending.window_label,
            pending.decided_by or "unknown",
            pending.stage_table,
        )
        approved_at = pending.decided_at or pending.requested_at
        return self.swap_decided(
            context,
            earlier,
            identity,
            history,
            adapter,
            spec,
            pending,
            approved_at,
            pending.decided_by,
            pending.comment,
        )

    def swap_decided(
        self,
        context: Context,
        owner: AttemptIdentity,
        identity: AttemptIdentity,
        history: SafeHistory,
        adapter: EngineAdapter,
        spec: WriteSpec,
        pending: PendingApproval,
        approved_at: datetime.datetime,
        by: str | None,
        comment: str | None,
    ) -> dict[str, Any]:
        """Swap an approval (`owner`'s: this attempt's, or an earlier try's carried over) and record
        it as this attempt's write; a failure that may pass with a retry left keeps the rows for
        the retry (`approvals.SWAP_RETRY`), any other drops them, recorded as stale or not_swapped."""
        store = history.store
        backfill = identity.run_type == "backfill"
        # carried over to a retry: that retry's fence too (no newer try of the task started writing)
        fence = (
            AttemptFence(store, identity, target_of(self), spec.lock_windows) if owner != identity else None
        )
        spec = _with_kill_switch(self, spec, history, identity.dag_id, backfill, approved_at, fence)
        swap: Any = swap_approved
        if not adapter.supports_transactions:  # Spark: one commit of the table's format (spark.approval)
            from airflow_idempotent.spark.approval import commit_approved

            swap = functools.partial(commit_approved, store=store)
        try:
            result = swap(adapter, spec, self.key_columns, pending)
        except Exception as err:  # stale data, the kill switch, the warehouse: approved, not swapped
            # Airflow retries it (not a refusal: stale data, a kill switch, a fence), and a retry is left
            if not isinstance(err, AirflowFailException) and _retry_comes(context):
                approvals.mark(store, owner, approvals.SWAP_RETRY, comment)
                reason = (
                    f"approved by {by or 'unknown'}; the swap failed ({type(err).__name__}: {err}): the "
                    "task's retry swaps the approved rows without asking again"
                )
                self.record_decided(
                    history, identity, target_of(self), spec, pending, "refused", reason, comment
                )
                raise
            status = approvals.STALE if isinstance(err, StaleApproval) else approvals.NOT_SWAPPED
            approvals.mark(store, owner, status, f"{comment or ''} [{status}: {err}]".strip())
            drop_kept(adapter, pending.stage_table)
            reason = f"approved by {by or 'unknown'} but NOT swapped ({status}): {err}"
            self.record_decided(history, identity, target_of(self), spec, pending, "refused", reason, comment)
            raise
        drop_kept(adapter, pending.stage_table)
        note = f"approved by {by or 'unknown'}" + (f": {comment}" if comment else "")
        if owner != identity:  # carried over: the approval is swapped now
            approvals.mark(store, owner, approvals.APPROVED, comment)
            note += f" (try {owner.try_number}; swapped by try {identity.try_number} after its swap failed)"
        later = [
            s for s in killswitch.active_switches(store, identity.dag_id, backfill) if s.set_at >= approved_at
        ]
        if later:  # said beside the write, so history tells why this window changed despite the stop
            note += f" (swapped: approved before the {later[0].describe()})"
        stored = self.record_decided(
            history, identity, target_of(self), spec, pending, "written", note, comment, result
        )
        self.log.info("%s; swapped window %s of %s: %s", note, pending.window_label, self.table, result.diff)
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "table": self.table,
            "window": spec.window.label(),
            "semantics": pending.semantics,
            "policy_version": pending.policy_version,
            "approved_by": by,
            "comment": comment,
            "rows_deleted": result.rows_deleted,
            "rows_inserted": result.rows_inserted,
            "rows_updated": result.rows_updated,
            "row_count": result.row_count,
            "checksum": result.checksum,
            "diff": result.diff.to_json(),
        }
        if stored is not None:
            out |= {"ordinal": stored.ordinal, "dataset_version": stored.dataset_version}
        self.emit_asset_event(context, spec.window, out)  # type: ignore[attr-defined]
        return out

    def refuse_decided(
        self,
        event: Mapping[str, Any],
        identity: AttemptIdentity,
        history: SafeHistory,
        spec: WriteSpec,
        pending: PendingApproval,
        by: str | None,
        comment: str | None,
        backfill: bool,
        adapter: EngineAdapter,
    ) -> NoReturn:
        """A rejection refuses this window only (the backfill's other windows go on); a timeout
        (nobody decided) also trips the backfill's kill switch, as an unanswered breach must stop
        the rest. Recorded, the kept rows dropped, then GuardRefusal."""
        store = history.store
        timed_out = "error" in event or bool(event.get("timedout"))
        status = approvals.TIMED_OUT if timed_out else approvals.REJECTED
        approvals.decide(store, identity, status, by, comment, _responded_at(event))
        drop_kept(adapter, pending.stage_table)
        how = "timed out" if timed_out else f"rejected by {by or 'unknown'}"
        reason = f"{pending.window_label}: {'; '.join(pending.breaches)} ({how})"
        self.record_decided(history, identity, target_of(self), spec, pending, "refused", reason, comment)
        said = f" ({comment})" if comment else ""
        if not timed_out:
            raise GuardRefusal(
                f"the breached window {pending.target} {pending.window_label} was {how}{said}: nothing was "
                "swapped and production's window is unchanged. Only this window is refused: the "
                "backfill's other windows go on. Rerun the window once its rule or data is fixed."
            )
        scope: Literal["backfill", "dag"] = "backfill" if backfill else "dag"
        killswitch.set_switch(store, scope, identity.dag_id, f"guard breach on {reason}")
        raise GuardRefusal(
            f"the breached window {pending.target} {pending.window_label} was {how}{said}: nothing was "
            f"swapped, production is unchanged, and the {scope} kill switch of {identity.dag_id} is on "
            f"(airflow-idempotent resume --dag {identity.dag_id}{' --backfill' if backfill else ''} "
            "once the cause is fixed)."
        )

    def record_decided(
        self,
        history: SafeHistory,
        identity: AttemptIdentity,
        target: str,
        spec: WriteSpec,
        pending: PendingApproval,
        status: str,
        message: str,
        comment: str | None,
        result: Any = None,
    ) -> Any:
        """The window write of a decided approval (written or refused), with the approved diff."""
        from airflow_idempotent.hooks.warehouse import WarehouseHook

        adapter = WarehouseHook(conn_id=self.conn_id).adapter
        parts_in = self.fingerprint_parts(adapter, spec, pending.policy_version, identity.code)  # type: ignore[attr-defined]
        digest, parts = fingerprint(parts_in)
        return history.record(
            identity.write_record(
                target,
                spec.window,
                self.strategy,
                status,
                digest,
                parts,
                pending.policy_version,
                pending.semantics,
                diff=json.dumps(pending.diff, default=str),
                **with_counts(message, result),
            )
        )


def target_of(op: ApprovalMixin) -> str:
    return f"{op.conn_id}:{op.table}"


def _with_kill_switch(
    op: Any,
    spec: WriteSpec,
    history: SafeHistory,
    dag_id: str,
    backfill: bool,
    approved_at: datetime.datetime,
    fence: AttemptFence | None = None,
) -> WriteSpec:
    """The spec whose last word before commit is the kill switch (fail closed, as in a backfill),
    counting only switches set before the approval: a stop (another window's timeout, the Stop
    action) that comes after a person approved this window does not undo the decision; then the
    attempt's `fence`, if given."""

    def before_commit() -> None:
        with StoreLink(history.store) as link:  # both checks on one connection (history.link)
            if fence is not None:
                fence.link = link
            op.check_kill_switch(
                history,
                dag_id,
                backfill,
                fail_closed=True,
                when="before swapping an approved window",
                set_before=approved_at,
                link=link,
            )
            if fence is not None:
                fence.check()
                fence.link = None

    return dataclasses.replace(spec, before_commit=before_commit)


def _retry_comes(context: Context) -> bool:
    """Whether Airflow retries this task instance if this try fails (retries left: Airflow's
    `is_eligible_to_retry`)."""
    ti = context["task_instance"]
    return int(getattr(ti, "try_number", 0) or 0) <= int(getattr(ti, "max_tries", 0) or 0)


def _responded_at(event: Mapping[str, Any]) -> datetime.datetime | None:
    """When Airflow recorded the person's response (the resume event's `responded_at`), as UTC."""
    value = event.get("responded_at")
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(value, datetime.datetime):
        return None
    return value.replace(tzinfo=datetime.timezone.utc) if value.tzinfo is None else value


def ask_for_approval(
    context: Context, task: Any, pending: PendingApproval, timeout: datetime.timedelta
) -> None:
    """Airflow's human-in-the-loop request on this task instance, then park until it is answered.

    On Airflow 3.3+ the task waits in `awaiting_input` (the scheduler resolves the timeout with
    the default, Reject); before 3.3 it defers to the standard provider's HITLTrigger.
    """
    from airflow.sdk import Param
    from airflow.sdk.execution_time.hitl import upsert_hitl_detail

    ti_id = context["task_instance"].id
    params = {
        COMMENT: Param(
            "", type="string", title="Comment", description="Why you approve or reject (kept in history)"
        ).serialize()
    }
    upsert_hitl_detail(
        ti_id=ti_id,
        options=list(OPTIONS),
        subject=subject(pending),
        body=request_body(pending),
        defaults=[REJECT],
        multiple=False,
        params=params,
    )
    try:
        from airflow.sdk.exceptions import TaskAwaitingInput
    except ImportError:  # Airflow 3.1 / 3.2: the triggerer waits for the response
        from airflow.providers.standard.triggers.hitl import HITLTrigger

        task.defer(
            trigger=HITLTrigger(
                ti_id=ti_id,
                options=list(OPTIONS),
                defaults=[REJECT],
                params=params,
                multiple=False,
                timeout_datetime=pending.expires_at,
            ),
            method_name="approval_complete",
        )
    raise TaskAwaitingInput(method_name="approval_complete", timeout=timeout)

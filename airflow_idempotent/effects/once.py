"""Side effects at most once per identity: ``once(...)`` and ``perform(effect, ...)``.

In task code::

    from airflow_idempotent import effects

    with effects.once("payout-file", key=policy, granularity="day") as e:
        if e.needed:  # False when done before: e.outcome holds the original result
            ref = bank.upload(data, idempotency_key=e.idempotency_key)
            e.record(ref)

What happens, in order:

1. The identity (DAG, task, window, effect name, business key) gives the idempotency key
   ``idem-<sha256>``. The window comes from the run (``window_from_context``), never the clock.
2. The attempt takes the identity's owner lock (waiting at most ``wait`` seconds for a live attempt).
3. No row: it is claimed (INSERT, state ``pending``, committed) BEFORE the call.
   ``done``: skipped and logged with the original reference. ``pending`` from an attempt that is
   gone: reconciled through ``lookup`` by idempotency key when the target can answer, otherwise the
   task fails with :class:`EffectPendingError` asking for ``airflow-idempotent effects resolve``.
   ``failed``: claimed again (it never took effect, so sending it is not a duplicate).
4. The call is made (the body of the ``with``). Success: ``done`` with the reference, committed.
   :class:`EffectNotPerformed`: ``failed``. Any other exception: outcome unknown, stays ``pending``.

A declared rerun (the run's conf, read by the backfill guard's rule) changes step 3: see
``effects.policy`` for what replay, corrective and reconcile do to an effect.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import sqlalchemy as sa
import tenacity

from airflow_idempotent.effects.effect import Effect, EffectCall, EffectResult, Lookup, Outcome
from airflow_idempotent.effects.entry import COMPENSATED, DONE, FAILED, PENDING, SUPPRESSED, EffectEntry
from airflow_idempotent.effects.errors import (
    EffectBusyError,
    EffectError,
    EffectLedgerError,
    EffectNotPerformed,
    EffectPendingError,
)
from airflow_idempotent.effects.identity import Claimant, EffectIdentity
from airflow_idempotent.effects.ledger import Ledger
from airflow_idempotent.effects.policy import RerunPolicy
from airflow_idempotent.history.store import DEFAULT_CONN_ID
from airflow_idempotent.window import Anchor, Window, parse_granularity, window_from_context

if TYPE_CHECKING:
    import datetime

log = logging.getLogger(__name__)

#: Seconds an attempt waits for another live attempt on the same effect before giving up (retryable).
DEFAULT_WAIT = 30.0
#: Pauses between the offers of a call's outcome to the ledger (it went out: the record must land).
DONE_COMMIT_PAUSES = (0.5, 1.0, 2.0)

F = TypeVar("F", bound=Callable[..., Any])


class Once:
    """Context manager and decorator: the body runs at most once per effect identity.

    :param name: the effect's name, part of its identity (e.g. "payout-file").
    :param key: the business key, part of the identity (a string, or JSON-serialisable); a rerun of
        the window with another key is another effect. A callable is called with the context.
    :param context: the task's context (default: Airflow's current context).
    :param granularity, timezone, anchor: how the window is derived (see window_from_context).
    :param lookup: ``lookup(call) -> Lookup``: asks the target about ``call.idempotency_key`` after
        a crashed attempt. Without it such an effect waits for a human decision.
    :param conn_id: the history store connection (the ledger lives there).
    :param wait: seconds to wait for another live attempt on the same effect.
    :param ledger: a Ledger to use instead of the connection's (tests, scripts).
    :param task: the operator, when the context has no task instance (tests, scripts).
    """

    def __init__(
        self,
        name: str,
        key: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
        granularity: str | datetime.timedelta | None = None,
        timezone: str = "UTC",
        anchor: Anchor = "start",
        lookup: Callable[[EffectCall], Lookup] | None = None,
        conn_id: str = DEFAULT_CONN_ID,
        wait: float = DEFAULT_WAIT,
        ledger: Ledger | None = None,
        task: Any = None,
    ) -> None:
        parse_granularity(granularity)
        self.name = name
        self.key = key
        self.context = context
        self.granularity = granularity
        self.timezone = timezone
        self.anchor: Anchor = anchor
        self.lookup = lookup
        self.conn_id = conn_id
        self.wait = float(wait)
        self.ledger = ledger
        self.task = task
        self.outcome: Outcome | None = None
        self._call: EffectCall | None = None
        self._entry: EffectEntry | None = None
        self._claimant: Claimant | None = None
        self._stack: contextlib.ExitStack | None = None

    # ------------------------------------------------------------------ decorator
    def __call__(self, func: F) -> F:
        """Decorate a function: it runs only when the effect is needed; the Outcome dict is returned.

        The function's return value is the reference (a string), an EffectResult, or a dict
        (stored as details; its "reference" or "id" is the reference). A parameter named
        ``effect`` receives the EffectCall (for its idempotency_key).
        """
        wants_handle = "effect" in inspect.signature(func).parameters

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            guard = self._fresh()
            with guard as call:
                if call.needed:
                    if wants_handle:
                        kwargs["effect"] = call
                    _record_return(call, func(*args, **kwargs))
            assert guard.outcome is not None
            return guard.outcome.as_dict()

        return wrapper  # type: ignore[return-value]

    def _fresh(self) -> Once:
        return Once(
            self.name,
            self.key,
            context=self.context,
            granularity=self.granularity,
            timezone=self.timezone,
            anchor=self.anchor,
            lookup=self.lookup,
            conn_id=self.conn_id,
            wait=self.wait,
            ledger=self.ledger,
            task=self.task,
        )

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> EffectCall:
        if self._stack is not None:
            raise EffectError("a once(...) guard is entered once; create a new one per effect")
        context = self.context if self.context is not None else _current_context()
        window = window_from_context(context, self.granularity, self.timezone, self.anchor)
        attempt = _attempt(context, self.task)
        key = self.key(context) if callable(self.key) else self.key
        identity = EffectIdentity.of(attempt.dag_id, attempt.task_id, window, self.name, key)
        policy = RerunPolicy.from_context(context, attempt.run_id, self.task)
        self._claimant = Claimant.here(
            run_id=attempt.run_id,
            try_number=attempt.try_number,
            map_index=attempt.map_index,
            run_type=attempt.run_type,
            semantics=policy.semantics,
        )
        self._stack = contextlib.ExitStack()
        try:
            ledger = self.ledger or Ledger.from_airflow(self.conn_id)
            self.ledger = ledger
            ledger.migrate()
            call = self._enter(ledger, identity, window, context, policy)
        except sa.exc.SQLAlchemyError as err:
            self._stack.close()
            raise EffectLedgerError(
                f"the effect ledger (history store {self.conn_id!r}) cannot be used: "
                f"{type(err).__name__}: {str(err).splitlines()[0][:300]}. Nothing was sent for "
                f"{identity.describe()}; a retry tries again."
            ) from err
        except BaseException:
            self._stack.close()
            raise
        if not call.needed:
            self._stack.close()
        self._call = call
        return call

    def _enter(
        self,
        ledger: Ledger,
        identity: EffectIdentity,
        window: Window,
        context: Mapping[str, Any],
        policy: RerunPolicy,
    ) -> EffectCall:
        assert self._stack is not None and self._claimant is not None
        try:
            self._stack.enter_context(ledger.owner_lock(identity.key, self.wait))
        except EffectBusyError:
            entry = ledger.get(identity.key)
            if entry is not None and entry.state == DONE and not policy.declared:
                return self._skip(entry, window, context, "skipped", "already done")
            owner = f" by {entry.owner()}, state {entry.state}" if entry is not None else ""
            raise EffectBusyError(
                f"{identity.describe()} is being performed by another live attempt{owner}; waited "
                f"{self.wait:g} s. Nothing was sent by this attempt: a retry will find it done (skipped) "
                "or failed (sent again)."
            ) from None
        return self._decide(ledger, identity, window, context, policy)

    def _decide(
        self,
        ledger: Ledger,
        identity: EffectIdentity,
        window: Window,
        context: Mapping[str, Any],
        policy: RerunPolicy,
    ) -> EffectCall:
        claimant = self._claimant
        assert claimant is not None
        entry = ledger.get(identity.key)
        if entry is None:
            if policy.suppress:
                decision = policy.decision("a new effect, not sent")
                if ledger.claim_new(identity, claimant, state=SUPPRESSED, decision=decision):
                    entry = ledger.get(identity.key)
                    assert entry is not None
                    return self._skip(entry, window, context, "suppressed", decision)
            elif ledger.claim_new(
                identity,
                claimant,
                decision=policy.decision("a new effect, sent") if policy.declared else None,
            ):
                return self._go(ledger.get(identity.key), window, context)
            raise EffectBusyError(
                f"{identity.describe()} was claimed by another attempt at the same moment (its owner lock "
                "is not shared with this host): nothing was sent by this attempt; a retry will find it"
            )

        if entry.state in (DONE, COMPENSATED):
            if policy.resend and entry.run_id != claimant.run_id:
                generation = entry.generation + 1
                decision = policy.decision(
                    f"re-sent as generation {generation} (generation {entry.generation}: "
                    f"{entry.idempotency_key}, {entry.state}, reference {entry.reference})"
                )
                return self._go(
                    ledger.reclaim(entry, claimant, generation=generation, decision=decision), window, context
                )
            if policy.declared and entry.run_id == claimant.run_id:  # this run sent it: keep its decision
                why = policy.decision("already sent by this run")
                ledger.log_event(entry, claimant, "skipped", why)
            elif policy.declared:
                why = policy.decision(f"{entry.state}, not re-sent")
                ledger.record_decision(entry, claimant, why)
            else:
                why = f"already {entry.state}"
                ledger.log_event(entry, claimant, "skipped", f"{why}: skipped by {claimant.describe()}")
            return self._skip(entry, window, context, "skipped", why)

        if entry.state == PENDING:
            if policy.suppress:
                decision = policy.decision(
                    f"not sent; still pending from {entry.owner()}: resolve it with "
                    f"`airflow-idempotent effects resolve --key {entry.idempotency_key} --as ...`"
                )
                ledger.record_decision(entry, claimant, decision)
                log.warning("%s: %s", identity.describe(), decision)
                return self._skip(entry, window, context, "suppressed", decision)
            if entry.resend_requested:
                resolution = f"sent again by {claimant.describe()} as decided: {entry.resolution}"
                return self._go(ledger.reclaim(entry, claimant, resolution=resolution), window, context)
            return self._reconcile(ledger, entry, window, context)

        # failed or suppressed: it never took effect, so sending it is not a duplicate
        if policy.suppress:
            decision = policy.decision(f"{entry.state}, not sent")
            ledger.record_decision(entry, claimant, decision)
            return self._skip(entry, window, context, "suppressed", decision)
        resolution = f"{entry.state} before; sent by {claimant.describe()}"
        sent = policy.decision("sent") if policy.declared else None
        return self._go(
            ledger.reclaim(entry, claimant, resolution=resolution, decision=sent), window, context
        )

    def _reconcile(
        self, ledger: Ledger, entry: EffectEntry, window: Window, context: Mapping[str, Any]
    ) -> EffectCall:
        """A pending row whose attempt is gone: ask the target, never resend blindly."""
        claimant = self._claimant
        assert claimant is not None
        probe = EffectCall.of(entry, window, context, needed=False)
        answer = self.lookup(probe) if self.lookup is not None else Lookup.unknown("no lookup declared")
        who = claimant.describe()
        if answer.state == "found":
            resolution = f"reconciled by {who}: the target has idempotency key {entry.idempotency_key}" + (
                f" ({answer.detail})" if answer.detail else ""
            )
            if not ledger.finish(
                entry,
                DONE,
                claimant=claimant,
                reference=answer.reference,
                details={"reconciled": answer.detail or "found by idempotency key"},
                resolution=resolution,
                event="reconciled",
            ):
                raise EffectBusyError(f"{entry.idempotency_key} changed while reconciling it: retry")
            done = ledger.get(entry.identity_key)
            assert done is not None
            return self._skip(done, window, context, "reconciled", resolution)
        if answer.state in ("absent", "replay"):
            how = (
                "the target has never seen it"
                if answer.state == "absent"
                else "the target deduplicates on the key, sent again with it"
            )
            resolution = f"reconciled by {who}: {how}" + (f" ({answer.detail})" if answer.detail else "")
            return self._go(ledger.reclaim(entry, claimant, resolution=resolution), window, context)
        why = f" ({answer.detail})" if answer.detail else ""
        key = entry.idempotency_key
        raise EffectPendingError(
            f"{entry.effect_identity().describe()} is PENDING: {entry.owner()} claimed it at "
            f"{entry.claimed_at.isoformat()} and ended without recording whether the call went out"
            f"{' (last error: ' + entry.error.splitlines()[0][:200] + ')' if entry.error else ''}, and "
            f"its target cannot be asked about idempotency key {key}{why}. It is NOT sent again "
            "blindly. Check the target, then decide:\n"
            f"  airflow-idempotent effects resolve --key {key} --as done --reference <the target's id>"
            "   # it went out\n"
            f"  airflow-idempotent effects resolve --key {key} --as failed"
            "   # it did not go out: the next attempt sends it\n"
            f"  airflow-idempotent effects resolve --key {key} --as resend"
            "   # unknown: send again with the same key\n"
            "then clear this task. Nothing was sent by this attempt."
        )

    def _go(self, entry: EffectEntry | None, window: Window, context: Mapping[str, Any]) -> EffectCall:
        if entry is None:
            raise EffectBusyError(
                "the effect's ledger row changed while this attempt claimed it: nothing was sent; retry"
            )
        self._entry = entry
        log.info(
            "%s: claimed (attempt %d, generation %d, idempotency key %s)",
            entry.effect_identity().describe(),
            entry.attempt,
            entry.generation,
            entry.idempotency_key,
        )
        return EffectCall.of(entry, window, context, needed=True)

    def _skip(
        self,
        entry: EffectEntry,
        window: Window,
        context: Mapping[str, Any],
        status: Literal["skipped", "reconciled", "suppressed"],
        why: str,
    ) -> EffectCall:
        outcome = Outcome.of(entry, status, why)
        self.outcome = outcome
        if status == "skipped":
            log.info(
                "%s: skipped (%s): %s by %s, finished %s, reference %s (idempotency key %s); the "
                "original result is %s",
                entry.effect_identity().describe(),
                why,
                entry.state,
                entry.owner(),
                entry.finished_at.isoformat() if entry.finished_at else "-",
                entry.reference,
                entry.idempotency_key,
                entry.details or "{}",
            )
        else:
            log.info("%s: %s: %s", entry.effect_identity().describe(), status, why)
        return EffectCall.of(entry, window, context, needed=False, outcome=outcome)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        call, entry, claimant, ledger = self._call, self._entry, self._claimant, self.ledger
        if call is None or not call.needed:
            return False
        assert entry is not None and claimant is not None and ledger is not None and self._stack is not None
        with self._stack:  # the owner lock is released only after the outcome is committed
            if exc is None:
                self._commit_done(ledger, entry, claimant, call)
            elif isinstance(exc, EffectNotPerformed):
                error = f"not performed: {exc}"
                try:
                    ledger.finish(entry, FAILED, claimant=claimant, error=error)
                except sa.exc.SQLAlchemyError as err:  # it stays pending: the next attempt asks the target
                    log.error(
                        "could not record %s as failed (%s): it stays pending", entry.idempotency_key, err
                    )
                log.warning("%s: %s", call.identity.describe(), error)
            else:
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:500] if str(exc) else ''}"
                try:
                    ledger.note_error(entry, claimant, error)
                except sa.exc.SQLAlchemyError as err:
                    log.error("could not record the error of %s (%s)", entry.idempotency_key, err)
                log.error(
                    "%s: the call raised %s: whether it went out is unknown, so it stays pending "
                    "(idempotency key %s); the next attempt reconciles it before anything is sent again",
                    call.identity.describe(),
                    error,
                    entry.idempotency_key,
                )
        return False

    def _commit_done(self, ledger: Ledger, entry: EffectEntry, claimant: Claimant, call: EffectCall) -> None:
        """Record the call as done, offering it to the ledger a few times (it went out: never lose it)."""

        def finish() -> None:
            if not ledger.finish(
                entry, DONE, claimant=claimant, reference=call.reference, details=call.details
            ):
                raise EffectError(
                    f"{call.identity.describe()} went out (reference {call.reference}) but its ledger "
                    f"row {entry.idempotency_key} changed under this attempt: inspect it with "
                    "`airflow-idempotent effects list`"
                )

        def warn(state: tenacity.RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            log.warning("recording %s as done failed (%s): trying again", entry.idempotency_key, error)

        try:
            tenacity.Retrying(
                retry=tenacity.retry_if_exception_type(sa.exc.SQLAlchemyError),
                stop=tenacity.stop_after_attempt(len(DONE_COMMIT_PAUSES) + 1),
                wait=tenacity.wait_chain(*(tenacity.wait_fixed(p) for p in DONE_COMMIT_PAUSES)),
                after=warn,
                reraise=True,
            )(finish)
        except sa.exc.SQLAlchemyError as last:
            raise EffectLedgerError(
                f"{call.identity.describe()} went out (reference {call.reference}) but the ledger could not "
                f"record it ({last}): it stays pending under idempotency key {entry.idempotency_key}, and "
                "the next attempt reconciles it before anything is sent again"
            ) from last
        done = ledger.get(entry.identity_key) or entry
        self.outcome = Outcome.of(done, "performed", "performed by this attempt")
        log.info(
            "%s: done, reference %s (idempotency key %s)",
            call.identity.describe(),
            call.reference,
            entry.idempotency_key,
        )


#: At most once per (DAG, task, window, name, key): a context manager or a decorator. The class
#: itself, under the name users call, so its signature lives in one place (Once.__init__).
once = Once


def perform(
    effect: Effect,
    key: Any = None,
    *,
    name: str | None = None,
    context: Mapping[str, Any] | None = None,
    granularity: str | datetime.timedelta | None = None,
    timezone: str = "UTC",
    anchor: Anchor = "start",
    conn_id: str = DEFAULT_CONN_ID,
    wait: float = DEFAULT_WAIT,
    ledger: Ledger | None = None,
    task: Any = None,
) -> Outcome:
    """Perform `effect` at most once for its identity; reconciliation asks ``effect.lookup``."""
    guard = Once(
        name or effect.name,
        key,
        context=context,
        granularity=granularity,
        timezone=timezone,
        anchor=anchor,
        lookup=effect.lookup,
        conn_id=conn_id,
        wait=wait,
        ledger=ledger,
        task=task,
    )
    with guard as call:
        if call.needed:
            result = effect.perform(call)
            call.record(result.reference, **dict(result.details))
    assert guard.outcome is not None
    return guard.outcome


# ----------------------------------------------------------------------------------- helpers
@dataclass(frozen=True)
class _Attempt:
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    run_type: str | None


def _attempt(context: Mapping[str, Any], task: Any) -> _Attempt:
    """Which attempt is running, from the task instance (or the task, outside Airflow)."""
    from airflow_idempotent.identity import AttemptIdentity

    task = task if task is not None else context.get("task")
    if context.get("ti") is None and context.get("task_instance") is None and task is None:
        raise EffectError(
            "the context has no task instance and no task, so the effect has no DAG and task in its "
            "identity: call once(...) inside a running task, or pass task=<the operator>"
        )
    ident = AttemptIdentity.from_context(context, task)
    return _Attempt(
        ident.dag_id, ident.run_id, ident.task_id, ident.map_index, ident.try_number, ident.run_type
    )


def _current_context() -> Mapping[str, Any]:
    from airflow.sdk import get_current_context

    try:
        return get_current_context()
    except Exception as err:
        raise EffectError(
            "once(...) outside a running task needs context=<the task's context>: "
            f"there is no current Airflow context ({err})"
        ) from None


def _record_return(call: EffectCall, value: Any) -> None:
    if isinstance(value, EffectResult):
        call.record(value.reference, **dict(value.details))
    elif isinstance(value, Mapping):
        ref = value.get("reference", value.get("id"))
        call.record(None if ref is None else str(ref), **{str(k): v for k, v in value.items()})
    else:
        call.record(None if value is None else str(value))

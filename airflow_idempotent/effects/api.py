"""Side effects at most once per identity: ``once(...)``, ``perform(effect, ...)``, ``EffectOperator``.

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

A declared rerun changes step 3: a run whose conf says ``{"semantics": "corrective"}`` (a
corrective backfill) or ``{"semantics": "replay"}`` sends nothing by default and records that
decision on the ledger row; ``{"semantics": "corrective", "resend_effects": true}`` re-sends done
effects once per run, as a new generation with a new idempotency key.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import sqlalchemy as sa
from airflow.sdk import BaseOperator

from airflow_idempotent.effects.ledger import (
    COMPENSATED,
    DONE,
    FAILED,
    PENDING,
    SUPPRESSED,
    Claimant,
    EffectBusyError,
    EffectEntry,
    EffectError,
    EffectIdentity,
    EffectLedgerError,
    EffectNotPerformed,
    EffectPendingError,
    Ledger,
)
from airflow_idempotent.history.store import DEFAULT_CONN_ID
from airflow_idempotent.window import Anchor, Window, parse_granularity, window_from_context

if TYPE_CHECKING:
    import datetime

    import jinja2
    from airflow.sdk import Context

log = logging.getLogger(__name__)

#: Seconds an attempt waits for another live attempt on the same effect before giving up (retryable).
DEFAULT_WAIT = 30.0
#: Conf `semantics` values that declare a corrective backfill (effects not re-sent unless asked).
CORRECTIVE = frozenset({"corrective", "corrective_backfill", "corrective-backfill"})
#: Conf `semantics` values that declare a replay (effects never re-sent).
REPLAY = frozenset({"replay"})
#: How often the outcome of a call that went out is offered to the ledger before giving up.
_DONE_COMMIT_TRIES = (0.0, 0.5, 1.0, 2.0)

F = TypeVar("F", bound=Callable[..., Any])


# ----------------------------------------------------------------------------------- values
@dataclass(frozen=True)
class Lookup:
    """What the target says about an idempotency key, when asked after a crashed attempt.

    - ``found``: it has the effect (``reference`` is its id): recorded as done, not sent again;
    - ``absent``: it never received it: sent now, with the same key;
    - ``replay``: the target deduplicates on the key, so sending again returns the original;
    - ``unknown``: the target cannot be asked: a human decides (``effects resolve``).
    """

    state: Literal["found", "absent", "replay", "unknown"]
    reference: str | None = None
    detail: str = ""

    @classmethod
    def found(cls, reference: str | None, detail: str = "") -> Lookup:
        return cls("found", reference, detail)

    @classmethod
    def absent(cls, detail: str = "") -> Lookup:
        return cls("absent", None, detail)

    @classmethod
    def replay(cls, detail: str = "") -> Lookup:
        return cls("replay", None, detail)

    @classmethod
    def unknown(cls, detail: str = "") -> Lookup:
        return cls("unknown", None, detail)


@dataclass(frozen=True)
class EffectResult:
    """What a call returned: the target's reference and details worth keeping (JSON-serialisable)."""

    reference: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What happened to an effect in this attempt; ``as_dict()`` is what operators return (XCom)."""

    status: Literal["performed", "skipped", "reconciled", "suppressed"]
    effect: str
    window: str
    business_key: str | None
    identity_key: str
    idempotency_key: str
    generation: int
    state: str
    reference: str | None
    details: Mapping[str, Any]
    message: str

    @property
    def performed(self) -> bool:
        return self.status == "performed"

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "effect": self.effect,
            "window": self.window,
            "business_key": self.business_key,
            "identity_key": self.identity_key,
            "idempotency_key": self.idempotency_key,
            "generation": self.generation,
            "state": self.state,
            "reference": self.reference,
            "details": dict(self.details),
            "message": self.message,
        }


@dataclass
class EffectCall:
    """The handle task code gets: whether to make the call, and the key to make it with."""

    identity: EffectIdentity
    idempotency_key: str
    generation: int
    window: Window
    context: Mapping[str, Any]
    #: True: make the call now (this attempt owns the claim). False: ``outcome`` says why not.
    needed: bool
    outcome: Outcome | None = None
    reference: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def record(self, reference: str | None = None, **details: Any) -> None:
        """The target's reference (payment id, Message-ID, file path) and details, stored as done."""
        if not self.needed:
            raise EffectError(
                f"{self.identity.describe()} was not claimed by this attempt: nothing to record"
            )
        self.reference = None if reference is None else str(reference)
        self.details.update(details)


class Effect:
    """An external effect the ledger performs at most once per identity.

    Subclasses implement ``perform`` (send, using ``call.idempotency_key``) and, when the target
    can say whether it received a key, ``lookup``. Raise :class:`EffectNotPerformed` from
    ``perform`` only when the call certainly did not take effect.
    """

    #: part of the effect's identity (e.g. "payout-file")
    name: str

    def perform(self, call: EffectCall) -> EffectResult:
        raise NotImplementedError

    def lookup(self, call: EffectCall) -> Lookup:
        return Lookup.unknown(f"{type(self).__name__} cannot ask its target about an idempotency key")


@dataclass(frozen=True)
class RerunPolicy:
    """A run's declaration about effects, from its conf: recorded with every decision it causes."""

    run_id: str
    semantics: str | None = None
    resend: bool = False

    @classmethod
    def from_context(cls, context: Mapping[str, Any], run_id: str) -> RerunPolicy:
        conf = getattr(context.get("dag_run"), "conf", None) or {}
        if not isinstance(conf, Mapping):
            conf = {}
        raw = conf.get("semantics")
        semantics = raw.strip().lower() if isinstance(raw, str) and raw.strip() else None
        resend = conf.get("resend_effects", False)
        if not isinstance(resend, bool):
            raise EffectError(
                f"the run's conf has resend_effects={resend!r}: use true or false (JSON booleans)"
            )
        if resend and semantics not in CORRECTIVE:
            raise EffectError(
                f"the run's conf asks resend_effects=true but declares semantics={raw!r}: only a "
                "corrective backfill re-sends effects; trigger it with "
                '{"semantics": "corrective", "resend_effects": true}'
            )
        return cls(run_id=run_id, semantics=semantics, resend=resend)

    @property
    def declared(self) -> bool:
        """A corrective backfill or a replay: every effect decision is recorded with the declaration."""
        return self.semantics in CORRECTIVE or self.semantics in REPLAY

    @property
    def suppress(self) -> bool:
        """Send nothing (the default of a corrective backfill, always for a replay)."""
        return self.declared and not self.resend

    def decision(self, what: str) -> str:
        kind = "corrective backfill" if self.semantics in CORRECTIVE else "replay"
        return f"{kind} run {self.run_id} (resend_effects={str(self.resend).lower()}): {what}"


# ----------------------------------------------------------------------------------- the guard
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
        policy = RerunPolicy.from_context(context, attempt.run_id)
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
            self._stack.enter_context(ledger.owner_lock(identity.key, window, self.wait))
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
        probe = EffectCall(
            identity=_identity_of(entry),
            idempotency_key=entry.idempotency_key,
            generation=entry.generation,
            window=window,
            context=context,
            needed=False,
        )
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
            f"{_identity_of(entry).describe()} is PENDING: {entry.owner()} claimed it at "
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
            _identity_of(entry).describe(),
            entry.attempt,
            entry.generation,
            entry.idempotency_key,
        )
        return EffectCall(
            identity=_identity_of(entry),
            idempotency_key=entry.idempotency_key,
            generation=entry.generation,
            window=window,
            context=context,
            needed=True,
        )

    def _skip(
        self,
        entry: EffectEntry,
        window: Window,
        context: Mapping[str, Any],
        status: Literal["skipped", "reconciled", "suppressed"],
        why: str,
    ) -> EffectCall:
        outcome = _outcome(entry, status, why)
        self.outcome = outcome
        if status == "skipped":
            log.info(
                "%s: skipped (%s): %s by %s, finished %s, reference %s (idempotency key %s); the "
                "original result is %s",
                _identity_of(entry).describe(),
                why,
                entry.state,
                entry.owner(),
                entry.finished_at.isoformat() if entry.finished_at else "-",
                entry.reference,
                entry.idempotency_key,
                entry.details or "{}",
            )
        else:
            log.info("%s: %s: %s", _identity_of(entry).describe(), status, why)
        return EffectCall(
            identity=_identity_of(entry),
            idempotency_key=entry.idempotency_key,
            generation=entry.generation,
            window=window,
            context=context,
            needed=False,
            outcome=outcome,
            reference=entry.reference,
            details=dict(entry.details),
        )

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
        last: Exception | None = None
        for pause in _DONE_COMMIT_TRIES:
            time.sleep(pause)
            try:
                if not ledger.finish(
                    entry, DONE, claimant=claimant, reference=call.reference, details=call.details
                ):
                    raise EffectError(
                        f"{call.identity.describe()} went out (reference {call.reference}) but its ledger "
                        f"row {entry.idempotency_key} changed under this attempt: inspect it with "
                        "`airflow-idempotent effects list`"
                    )
                break
            except sa.exc.SQLAlchemyError as err:
                last = err
                log.warning("recording %s as done failed (%s): trying again", entry.idempotency_key, err)
        else:
            raise EffectLedgerError(
                f"{call.identity.describe()} went out (reference {call.reference}) but the ledger could not "
                f"record it ({last}): it stays pending under idempotency key {entry.idempotency_key}, and "
                "the next attempt reconciles it before anything is sent again"
            )
        done = ledger.get(entry.identity_key) or entry
        self.outcome = _outcome(done, "performed", "performed by this attempt")
        log.info(
            "%s: done, reference %s (idempotency key %s)",
            call.identity.describe(),
            call.reference,
            entry.idempotency_key,
        )


def once(
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
) -> Once:
    """At most once per (DAG, task, window, name, key): a context manager or a decorator (see Once)."""
    return Once(
        name,
        key,
        context=context,
        granularity=granularity,
        timezone=timezone,
        anchor=anchor,
        lookup=lookup,
        conn_id=conn_id,
        wait=wait,
        ledger=ledger,
        task=task,
    )


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


# ----------------------------------------------------------------------------------- operator
class EffectOperator(BaseOperator):
    """Base class of operators whose work is one external effect, performed at most once per identity.

    Subclasses implement ``build_effect(context, window) -> Effect``. ``execute`` returns (XCom)
    the Outcome as a dict: status performed / skipped / reconciled / suppressed, reference, keys.

    :param effect_name: the effect's name in its identity (default: the task_id).
    :param key: the business key (templated); a rerun of the window with another key is another effect.
    :param granularity, timezone, anchor: how the window is derived from the run (as the write operators).
    :param history_conn_id: the history store connection holding the ledger.
    :param wait_timeout: seconds to wait for another live attempt on the same effect.
    """

    template_fields: Sequence[str] = ("key",)
    ui_color = "#fbe3d0"

    def __init__(
        self,
        *,
        effect_name: str | None = None,
        key: Any = None,
        granularity: str | datetime.timedelta | None = None,
        timezone: str = "UTC",
        anchor: Anchor = "start",
        history_conn_id: str = DEFAULT_CONN_ID,
        wait_timeout: float = DEFAULT_WAIT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        parse_granularity(granularity)
        self.effect_name = effect_name or self.task_id
        self.key = key
        self.granularity = granularity
        self.timezone = timezone
        self.anchor: Anchor = anchor
        self.history_conn_id = history_conn_id
        self.wait_timeout = float(wait_timeout)

    def window(self, context: Context | Mapping[str, Any]) -> Window:
        return window_from_context(context, self.granularity, self.timezone, self.anchor)

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        """Offer the window to templates ({{ window_start }}, {{ window_end }}, {{ window }})."""
        context.update(self.window(context).template_vars())  # type: ignore[typeddict-item]
        super().render_template_fields(context, jinja_env)

    def build_effect(self, context: Context | Mapping[str, Any], window: Window) -> Effect:
        raise NotImplementedError

    def execute(self, context: Context) -> dict[str, Any]:
        window = self.window(context)
        effect = self.build_effect(context, window)
        outcome = perform(
            effect,
            self.key,
            name=self.effect_name,
            context=context,
            granularity=self.granularity,
            timezone=self.timezone,
            anchor=self.anchor,
            conn_id=self.history_conn_id,
            wait=self.wait_timeout,
            task=self,
        )
        return outcome.as_dict()


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


def _identity_of(entry: EffectEntry) -> EffectIdentity:
    return EffectIdentity(
        dag_id=entry.dag_id,
        task_id=entry.task_id,
        window_start=entry.window_start,
        window_end=entry.window_end,
        window_label=entry.window_label,
        effect_name=entry.effect_name,
        business_key=entry.business_key,
    )


def _outcome(
    entry: EffectEntry, status: Literal["performed", "skipped", "reconciled", "suppressed"], why: str
) -> Outcome:
    return Outcome(
        status=status,
        effect=entry.effect_name,
        window=entry.window_label,
        business_key=entry.business_key,
        identity_key=entry.identity_key,
        idempotency_key=entry.idempotency_key,
        generation=entry.generation,
        state=entry.state,
        reference=entry.reference,
        details=entry.details,
        message=why,
    )


def _record_return(call: EffectCall, value: Any) -> None:
    if isinstance(value, EffectResult):
        call.record(value.reference, **dict(value.details))
    elif isinstance(value, Mapping):
        ref = value.get("reference", value.get("id"))
        call.record(None if ref is None else str(ref), **{str(k): v for k, v in value.items()})
    else:
        call.record(None if value is None else str(value))

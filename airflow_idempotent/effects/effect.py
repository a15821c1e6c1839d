"""What an effect is to task code: ``Effect`` (perform, lookup), the ``EffectCall`` handle, and
what a call or an attempt came to (``EffectResult``, ``Lookup``, ``Outcome``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_idempotent.effects.entry import EffectEntry
from airflow_idempotent.effects.errors import EffectError
from airflow_idempotent.effects.identity import EffectIdentity
from airflow_idempotent.window import Window

OutcomeStatus = Literal["performed", "skipped", "reconciled", "suppressed"]


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

    status: OutcomeStatus
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

    @classmethod
    def of(cls, entry: EffectEntry, status: OutcomeStatus, why: str) -> Outcome:
        """The outcome of an attempt that left the ledger row `entry`."""
        return cls(
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

    @classmethod
    def of(
        cls,
        entry: EffectEntry,
        window: Window,
        context: Mapping[str, Any],
        needed: bool,
        outcome: Outcome | None = None,
    ) -> EffectCall:
        """The handle on ledger row `entry`: its identity, key and generation. A call settled
        without sending (an `outcome`) carries the row's reference and details, the original's."""
        return cls(
            identity=entry.effect_identity(),
            idempotency_key=entry.idempotency_key,
            generation=entry.generation,
            window=window,
            context=context,
            needed=needed,
            outcome=outcome,
            reference=entry.reference if outcome is not None else None,
            details=dict(entry.details) if outcome is not None else {},
        )

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

"""Side effects at most once: an effect ledger with idempotency keys.

from airflow_idempotent import effects

with effects.once("payout-file", key="v1", granularity="day") as e:
    if e.needed:
        e.record(bank.upload(data, idempotency_key=e.idempotency_key))

Modules: ``once`` (once, perform: the protocol), ``effect`` (Effect, EffectCall, Lookup, Outcome),
``policy`` (what a declared rerun does to an effect), ``identity`` (identities and keys), ``entry``
(a ledger row and its states), ``ledger`` (the ledger), ``operator`` and ``builtin`` (HTTP, email,
file), ``errors``.
"""

from airflow_idempotent.effects.builtin import (
    EmailEffect,
    EmailEffectOperator,
    FileDeliveryEffect,
    FileDeliveryEffectOperator,
    HttpPostEffect,
    HttpPostEffectOperator,
)
from airflow_idempotent.effects.effect import Effect, EffectCall, EffectResult, Lookup, Outcome
from airflow_idempotent.effects.entry import STATES, EffectEntry
from airflow_idempotent.effects.errors import (
    EffectBusyError,
    EffectError,
    EffectLedgerError,
    EffectNotPerformed,
    EffectPendingError,
)
from airflow_idempotent.effects.identity import EffectIdentity
from airflow_idempotent.effects.ledger import Ledger, effects_for_windows
from airflow_idempotent.effects.once import DEFAULT_WAIT, Once, once, perform
from airflow_idempotent.effects.operator import EffectOperator
from airflow_idempotent.effects.policy import RerunPolicy

__all__ = [
    "DEFAULT_WAIT",
    "STATES",
    "Effect",
    "EffectBusyError",
    "EffectCall",
    "EffectEntry",
    "EffectError",
    "EffectIdentity",
    "EffectLedgerError",
    "EffectNotPerformed",
    "EffectOperator",
    "EffectPendingError",
    "EffectResult",
    "EmailEffect",
    "EmailEffectOperator",
    "FileDeliveryEffect",
    "FileDeliveryEffectOperator",
    "HttpPostEffect",
    "HttpPostEffectOperator",
    "Ledger",
    "Lookup",
    "Once",
    "Outcome",
    "RerunPolicy",
    "effects_for_windows",
    "once",
    "perform",
]

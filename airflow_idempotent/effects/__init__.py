"""Side effects at most once: an effect ledger with idempotency keys (see ``effects.api``).

from airflow_idempotent import effects

with effects.once("payout-file", key="v1", granularity="day") as e:
    if e.needed:
        e.record(bank.upload(data, idempotency_key=e.idempotency_key))
"""

from airflow_idempotent.effects.api import (
    DEFAULT_WAIT,
    Effect,
    EffectCall,
    EffectOperator,
    EffectResult,
    Lookup,
    Once,
    Outcome,
    RerunPolicy,
    once,
    perform,
)
from airflow_idempotent.effects.builtin import (
    EmailEffect,
    EmailEffectOperator,
    FileDeliveryEffect,
    FileDeliveryEffectOperator,
    HttpPostEffect,
    HttpPostEffectOperator,
)
from airflow_idempotent.effects.ledger import (
    STATES,
    EffectBusyError,
    EffectEntry,
    EffectError,
    EffectIdentity,
    EffectLedgerError,
    EffectNotPerformed,
    EffectPendingError,
    Ledger,
    effects_for_windows,
)

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

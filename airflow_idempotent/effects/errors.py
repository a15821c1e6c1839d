"""What can go wrong with an effect, and whether a retry can help (fail vs retryable)."""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException

from airflow_idempotent.errors import IdempotentError


class EffectError(IdempotentError):
    """An effect cannot be performed as declared (a fail: retrying cannot help)."""


class EffectPendingError(EffectError):
    """An earlier attempt claimed the effect and ended without recording whether it went out.

    The target cannot be asked by idempotency key, so a human decides: a fail, never retried.
    """


class EffectBusyError(AirflowException):
    """Another live attempt holds the effect past the wait: retryable, it will be done or failed."""


class EffectLedgerError(AirflowException):
    """The ledger cannot be read or written: retryable, and nothing was sent by this attempt."""


class EffectNotPerformed(Exception):
    """Raised by an effect when the call certainly did not take effect (refused or never sent).

    The ledger row becomes ``failed``; a later attempt may send it, which is not a duplicate.
    Any other exception during the call leaves the row ``pending`` (outcome unknown).
    """

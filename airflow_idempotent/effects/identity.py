"""What makes two attempts "the same effect", the keys derived from it, and who claims it.

An effect (a payment request, an email, a bank file) is identified by (DAG, task, window, effect
name, business key): never by the run, the try or the clock. Its idempotency key is a stable hash
of that identity, ``idem-<sha256 hex>``; a declared re-send (a corrective backfill with
``resend_effects``) is a new *generation* of the same identity and gets ``idem-<hex>-g<n>``, so a
target that deduplicates on keys sees a new request.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_idempotent.effects.errors import EffectError
from airflow_idempotent.window import Window, to_utc_datetime

KEY_PREFIX = "idem-"


def canonical_business_key(key: Any) -> str | None:
    """A business key as stable text: strings as they are, anything else as sorted JSON."""
    if key is None or isinstance(key, str):
        return key
    return json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)


def idempotency_key(identity_key: str, generation: int) -> str:
    """The key the target sees for one generation of an identity."""
    return identity_key if generation <= 1 else f"{identity_key}-g{generation}"


@dataclass(frozen=True)
class EffectIdentity:
    """What makes two attempts "the same effect": never the run, the try or the clock."""

    dag_id: str
    task_id: str
    window_start: datetime
    window_end: datetime
    window_label: str
    effect_name: str
    business_key: str | None = None

    @classmethod
    def of(
        cls, dag_id: str, task_id: str, window: Window, effect_name: str, key: Any = None
    ) -> EffectIdentity:
        if not effect_name or not str(effect_name).strip():
            raise EffectError("an effect needs a name, e.g. once('payout-file', key=...)")
        return cls(
            dag_id=dag_id,
            task_id=task_id,
            window_start=window.start,
            window_end=window.end,
            window_label=window.label(),
            effect_name=str(effect_name),
            business_key=canonical_business_key(key),
        )

    def canonical(self) -> str:
        """The JSON the key hashes: window bounds as UTC ISO 8601, so the zone read in is irrelevant."""
        bounds = [
            to_utc_datetime(b, "window bound").isoformat() for b in (self.window_start, self.window_end)
        ]
        return json.dumps(
            {
                "dag_id": self.dag_id,
                "task_id": self.task_id,
                "window": bounds,
                "effect": self.effect_name,
                "key": self.business_key,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @property
    def key(self) -> str:
        """``idem-<sha256 hex of the canonical identity>``: stable across runs, tries and hosts."""
        return KEY_PREFIX + hashlib.sha256(self.canonical().encode()).hexdigest()

    def idempotency_key(self, generation: int = 1) -> str:
        return idempotency_key(self.key, generation)

    def describe(self) -> str:
        key = "" if self.business_key is None else f", business key {self.business_key!r}"
        return (
            f"effect {self.effect_name!r} of {self.dag_id}.{self.task_id} for window {self.window_label}{key}"
        )


@dataclass(frozen=True)
class Claimant:
    """The attempt claiming an effect: recorded on the row, so a human can find it."""

    run_id: str
    try_number: int
    map_index: int = -1
    run_type: str | None = None
    semantics: str | None = None
    hostname: str | None = None
    pid: int | None = None

    @classmethod
    def here(cls, **values: Any) -> Claimant:
        return cls(hostname=socket.gethostname(), pid=os.getpid(), **values)

    def describe(self) -> str:
        return f"run {self.run_id} try {self.try_number} (host {self.hostname}, pid {self.pid})"

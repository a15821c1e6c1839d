"""One effect ledger row as plain data, and the states a row can be in.

States and transitions (every state change is an UPDATE guarded by the row's ``attempt`` counter,
so an attempt that lost its claim can never overwrite a newer attempt's state)::

    (absent)  -> pending      claim: INSERT, committed in its own transaction BEFORE the call
    (absent)  -> suppressed   a corrective backfill or replay that does not re-send effects
    pending   -> done         the call went out; the target's reference is recorded (or a
                              reconciliation found it at the target by its idempotency key)
    pending   -> failed       the call certainly did not take effect (refused, never reached)
    pending   -> pending      reclaimed: the target says absent, or a human decided to resend
    failed, suppressed -> pending   a later attempt sends it (it never happened: no duplicate)
    done, compensated  -> pending   only a corrective backfill with resend_effects=true
                                    (generation + 1, new idempotency key)
    done      -> compensated  by a human: the effect was undone outside (refund, recall)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal

from airflow_idempotent.effects.identity import EffectIdentity
from airflow_idempotent.window import Window, to_utc

State = Literal["pending", "done", "failed", "compensated", "suppressed"]
PENDING: State = "pending"
DONE: State = "done"
FAILED: State = "failed"
COMPENSATED: State = "compensated"
SUPPRESSED: State = "suppressed"
STATES: tuple[State, ...] = (PENDING, DONE, FAILED, COMPENSATED, SUPPRESSED)


@dataclass(frozen=True)
class EffectEntry:
    """One ledger row as plain data (datetimes timezone-aware UTC, as the store's column type reads them)."""

    id: int
    identity_key: str
    idempotency_key: str
    dag_id: str
    task_id: str
    window_start: datetime
    window_end: datetime
    window_label: str
    effect_name: str
    business_key: str | None
    identity: str
    state: str
    generation: int
    attempt: int
    run_id: str
    map_index: int
    try_number: int
    run_type: str | None
    semantics: str | None
    hostname: str | None
    pid: int | None
    claimed_at: datetime
    finished_at: datetime | None
    reference: str | None
    result: str | None
    error: str | None
    resolution: str | None
    decision: str | None
    resend_requested: bool
    previous: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> EffectEntry:
        values = {f.name: row[f.name] for f in fields(cls)}
        values["resend_requested"] = bool(values["resend_requested"])
        return cls(**values)

    @property
    def details(self) -> dict[str, Any]:
        return json.loads(self.result) if self.result else {}

    @property
    def previous_generations(self) -> list[dict[str, Any]]:
        return json.loads(self.previous) if self.previous else []

    def window(self) -> Window:
        return Window(start=to_utc(self.window_start), end=to_utc(self.window_end), source="ledger")

    def effect_identity(self) -> EffectIdentity:
        """The identity this row records (its key is `identity_key`)."""
        return EffectIdentity(
            dag_id=self.dag_id,
            task_id=self.task_id,
            window_start=self.window_start,
            window_end=self.window_end,
            window_label=self.window_label,
            effect_name=self.effect_name,
            business_key=self.business_key,
        )

    def owner(self) -> str:
        return f"run {self.run_id} try {self.try_number} (host {self.hostname}, pid {self.pid})"

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["result"] = self.details
        out["previous"] = self.previous_generations
        return out

"""Late data: the history records of a write with `lookback`, one per covered period.

A write over the covered periods (`window.covered_windows`) commits once; history remembers it
per period, so each period keeps its own ordinal, dataset version and checksum, and a period
written with lookback compares with the same period written alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from airflow_idempotent.history.spool import SafeHistory
from airflow_idempotent.identity import AttemptIdentity
from airflow_idempotent.window import Window
from airflow_idempotent.write_spec import PeriodResult


class LookbackWriter(Protocol):
    """What `record_periods` reads of the operator that wrote (`WindowWriteOperator`): declared here,
    so this module and the operator's guarded half need nothing of the operator's own module."""

    @property
    def lookback(self) -> int: ...

    @property
    def strategy(self) -> str: ...

    @property
    def log(self) -> Any: ...

    def period_counts(self, period: PeriodResult) -> dict[str, Any]: ...


def record_periods(
    op: LookbackWriter,
    history: SafeHistory,
    identity: AttemptIdentity,
    target: str,
    periods: Sequence[PeriodResult],
    digest: str,
    parts: str,
    policy: str | None,
    semantics: str | None,
    covered: Window,
    status: str = "written",
    counts: bool = True,
    note: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One history record per covered period of a write with lookback (each its own ordinal,
    row count and checksum); the XCom's ordinal and dataset version are the run's own period's."""
    out: dict[str, Any] = {"lookback": op.lookback, "periods": []}
    where, span = f"lookback={op.lookback}: period", covered.label()
    for number, period in enumerate(periods, start=1):
        stored = history.record(
            identity.write_record(
                target,
                period.window,
                op.strategy,
                status,
                digest,
                parts,
                policy,
                semantics,
                row_count=period.row_count,
                checksum=period.checksum,
                message="; ".join(m for m in (f"{where} {number} of {len(periods)} of {span}", note) if m),
                **(op.period_counts(period) if counts else {}),
                **extra,
            )
        )
        entry = period.as_dict()
        if stored is not None:
            entry |= stored.summary()
            if stored.nondeterministic:
                op.log.warning(
                    "NON-DETERMINISTIC: period %s of %s has the same fingerprint as an earlier write but "
                    "a different result (checksum %s, before %s)",
                    period.window.label(),
                    target,
                    period.checksum,
                    stored.previous_checksum,
                )
        out["periods"].append(entry)
    own = out["periods"][-1]
    out |= {k: own[k] for k in ("ordinal", "dataset_version", "nondeterministic") if k in own}
    op.log.info(
        "lookback=%d: recorded %s",
        op.lookback,
        ", ".join(
            f"{p['window']} ({p['row_count']} rows, write #{p.get('ordinal')})" for p in out["periods"]
        ),
    )
    return out

"""What a write strategy is given and what it answers: the validated spec of one write of a window
(`WriteSpec`), and its counts and checksums (`WriteResult`, one `PeriodResult` per covered period
with lookback). Shared by every engine's strategies (`strategies`, `guard.write`, `spark`), the
operators that build the spec and the history records made from the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlglot import exp

from airflow_idempotent.adapters.identifiers import validate_identifier
from airflow_idempotent.errors import SchemaError
from airflow_idempotent.window import Window

#: Parameter names the window owns; user parameters may not shadow them.
RESERVED_PARAMS = frozenset({"window_start", "window_end"})


@dataclass(frozen=True)
class WriteSpec:
    """What to write where, for which window: everything a strategy needs, already validated."""

    table: str
    query: exp.Expr
    window: Window
    partition_column: str | None
    params: Mapping[str, Any] = field(default_factory=dict)
    lock_timeout: float = 60.0
    #: compute the window's result checksum before commit (recorded in history)
    checksum: bool = True
    #: called last inside the transaction (e.g. the kill switch check); raising rolls back
    before_commit: Callable[[], None] | None = None
    #: with lookback, the covered periods oldest first (`window.covered_windows`); `window` is then
    #: their span, and each period gets its own count and checksum (one history record each)
    periods: tuple[Window, ...] = ()
    #: the writing attempt's identity (`AttemptIdentity.label`), for engines that tag their commit
    #: with it (Delta's user metadata); empty outside a task
    attempt: str = ""

    @property
    def lock_windows(self) -> Sequence[Window]:
        """What the write's transaction locks: each covered period, or its one window."""
        return self.periods or [self.window]

    def __post_init__(self) -> None:
        if self.periods and (self.periods[0].start, self.periods[-1].end) != (
            self.window.start,
            self.window.end,
        ):
            raise SchemaError(
                f"the covered periods {self.periods[0].label()} .. {self.periods[-1].label()} do not span "
                f"the window {self.window.label()}: build the spec with window.spanning(periods)."
            )
        if self.partition_column is not None:
            validate_identifier(self.partition_column, "partition_column")
        shadowed = RESERVED_PARAMS & set(self.params)
        if shadowed:
            raise SchemaError(
                f"parameters {sorted(shadowed)} are set by the window and cannot be given: "
                "remove them from the operator's parameters; the run's window binds them."
            )
        for name in self.params:
            validate_identifier(name, "parameter name")


@dataclass(frozen=True)
class PeriodResult:
    """One covered period of a write with lookback, counted in the database before commit."""

    window: Window
    #: the period's rows before the write (what an overwrite deleted); None when nothing was written
    rows_before: int | None
    #: the period's rows and result checksum as the transaction commits them
    row_count: int | None
    checksum: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "window": self.window.label(),
            "rows_before": self.rows_before,
            "row_count": self.row_count,
            "checksum": self.checksum,
        }


@dataclass(frozen=True)
class WriteResult:
    """What a write did, as logged and returned to XCom."""

    strategy: str
    table: str
    window: str
    rows_deleted: int
    rows_inserted: int
    rows_updated: int
    source_rows: int
    row_count: int | None = None
    checksum: str | None = None
    #: with lookback, each covered period's counts and checksum, oldest first
    periods: tuple[PeriodResult, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("periods")
        if self.periods:
            out["periods"] = [p.as_dict() for p in self.periods]
        return out

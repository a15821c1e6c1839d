"""What a guarded write found and did: its result, a kept stage, and the breach that carries them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from airflow_idempotent.guard.diff import WindowDiff
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.write_spec import PeriodResult, WriteResult


@dataclass(frozen=True)
class KeptStage:
    """A breached window's staged rows, committed to a table of their own to await a decision
    (on_breach="approve"), and production's window as it was when the diff was taken."""

    table: str
    rows: int
    checksum: str
    target_rows: int
    target_checksum: str
    #: up to KEY_SAMPLE_SIZE keys of each kind: {"changed": [...], "added": [...], "removed": [...]}
    samples: dict[str, list[Any]]
    #: a table format's version the diff read (a Delta version, an Iceberg snapshot id; None for a
    #: table never written): an approval commits only onto that version (`spark.approval`)
    table_version: int | None = None
    #: whether `table_version` applies (a Delta or Iceberg table on Spark)
    versioned: bool = False


@dataclass(frozen=True)
class GuardedResult:
    """What a guarded write found and did. On a breach it is carried by the GuardBreach."""

    mode: str
    diff: WindowDiff
    swapped: bool
    #: the window's checksum as committed (swap, reconcile) or as staged (replay)
    checksum: str | None
    row_count: int | None
    breaches: list[str]
    #: replay only: did the staged result reproduce the recorded checksum
    replay_matches: bool | None
    expected_checksum: str | None
    rows_deleted: int = 0
    rows_inserted: int = 0
    rows_updated: int = 0
    #: with lookback, each covered period's counts and checksum as committed (swap, reconcile)
    periods: tuple[PeriodResult, ...] = ()
    #: on a breach with `keep_on_breach`: where the staged rows wait for a decision
    kept: KeptStage | None = None
    #: a table format's own version of the commit (a Delta version, an Iceberg snapshot id)
    table_version: int | None = None

    @classmethod
    def refused(
        cls,
        mode: str,
        diff: WindowDiff,
        breaches: list[str],
        expected_checksum: str | None,
        kept: KeptStage | None = None,
    ) -> GuardedResult:
        """A breach: nothing swapped, so no committed checksum or row count (every engine's)."""
        return cls(mode, diff, False, None, None, breaches, None, expected_checksum, kept=kept)

    @classmethod
    def replayed(
        cls,
        mode: str,
        diff: WindowDiff,
        checksum: str | None,
        row_count: int | None,
        breaches: list[str],
        expected_checksum: str | None,
    ) -> GuardedResult:
        """A replay: the staged checksum compared with the recorded one, production untouched."""
        return cls(
            mode, diff, False, checksum, row_count, breaches, checksum == expected_checksum, expected_checksum
        )

    @classmethod
    def committed(
        cls,
        mode: str,
        diff: WindowDiff,
        checksum: str | None,
        row_count: int | None,
        expected_checksum: str | None,
        *,
        deleted: int,
        inserted: int,
        updated: int = 0,
        periods: tuple[PeriodResult, ...] = (),
        table_version: int | None = None,
    ) -> GuardedResult:
        """A swap or reconcile that committed: within the thresholds (or approved), so no breaches."""
        return cls(
            mode,
            diff,
            True,
            checksum,
            row_count,
            [],
            None,
            expected_checksum,
            rows_deleted=deleted,
            rows_inserted=inserted,
            rows_updated=updated,
            periods=periods,
            table_version=table_version,
        )

    @classmethod
    def of_commit(
        cls, mode: str, diff: WindowDiff, written: WriteResult, expected_checksum: str | None
    ) -> GuardedResult:
        """`committed`, with the figures of the commit's own result (a table format's commit: its
        counts, checksum, periods and the table version it made, when it has one)."""
        return cls.committed(
            mode,
            diff,
            written.checksum,
            written.row_count,
            expected_checksum,
            deleted=written.rows_deleted,
            inserted=written.rows_inserted,
            updated=written.rows_updated,
            periods=written.periods,
            table_version=getattr(written, "table_version", None),
        )

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["diff"] = self.diff.to_json()
        data["periods"] = [p.as_dict() for p in self.periods]
        return data


class GuardBreach(GuardRefusal):
    """A stop condition held: nothing was swapped. `.result` carries the diff, to be recorded."""

    def __init__(self, message: str, result: GuardedResult) -> None:
        super().__init__(message)
        self.result = result

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.result))

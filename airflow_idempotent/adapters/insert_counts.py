"""How a merge learns the rows its upsert inserted, as a part of every engine adapter.

A merge reports inserted and updated rows (the rest of the source's). The cheapest exact way is
the database's own: PostgreSQL keeps the transaction's inserted tuples per table
(`inserted_so_far`, read before and after the upsert); MariaDB's upsert counts the rows it
updates in LAST_INSERT_ID (`counts_updates`). Elsewhere the window is counted before the upsert
and after it. `start_tally` picks the way before the upsert, `InsertTally.inserted` reads it after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from airflow_idempotent.adapters.schema import ColumnInfo, TableInfo
from airflow_idempotent.errors import SchemaError


@dataclass(frozen=True)
class InsertTally:
    """What a merge read before its upsert, to know after it how many rows the upsert inserted."""

    adapter: InsertCounts
    #: The transaction's insert counter before the upsert (`inserted_so_far`), else None.
    held: int | None
    #: The upsert counts the rows it updates itself (`counts_updates`).
    counting: bool
    #: The window's rows before the upsert, -1 where not counted (or the write has no window).
    before: int
    #: Counts the window's rows (`start_tally`'s `count_window`).
    count_window: Callable[[], int]

    def inserted(
        self, conn: Connection, info: TableInfo, upserted: Any, source_rows: int, window_rows: int | None
    ) -> int:
        """The rows the upsert whose result is `upserted` inserted, out of `source_rows` it wrote;
        where no counter kept them, the window's rows after it (`window_rows`, or counted) less
        those before it."""
        if self.held is not None:
            return self.adapter.inserted_since(conn, info, self.held)
        if self.counting:
            return source_rows - self.adapter.updates_counted(upserted)
        if self.before < 0:
            return source_rows
        return (self.count_window() if window_rows is None else window_rows) - self.before


class InsertCounts:
    """The database's counters of a merge's inserted rows; the base has none (counts the window)."""

    def start_tally(
        self,
        conn: Connection,
        info: TableInfo,
        keys: Sequence[str],
        partition: ColumnInfo | None,
        count_window: Callable[[], int],
    ) -> InsertTally:
        """Before the upsert: read or zero this database's counter, else count the window
        (`count_window`; -1 for a write without a window, whose inserted rows are all its rows)."""
        held = self.inserted_so_far(conn, info) if partition is not None else None
        counting = held is None and self.counts_updates(info, keys, partition)
        if counting:
            self.reset_update_count(conn)
        before = count_window() if held is None and not counting else -1
        return InsertTally(self, held, counting, before, count_window)

    def inserted_so_far(self, conn: Connection, info: TableInfo) -> int | None:
        """The rows this transaction has inserted into the table so far, where the database keeps
        an exact count of them for the transaction (PostgreSQL); None where it does not, and a
        merge counts the window before and after its upsert instead (a scan of the window). Only
        the difference of two reads in one transaction is meaningful."""
        return None

    def inserted_since(self, conn: Connection, info: TableInfo, counted: int) -> int:
        """The rows inserted into the table since `inserted_so_far` read `counted` in this transaction."""
        now = self.inserted_so_far(conn, info)
        if now is None:  # a trigger, rule or child table was added to the target during the write
            raise SchemaError(
                f"{info.qualified} changed during the write (a trigger, rule or child table was added), "
                "so its inserted rows cannot be told from its updated ones: nothing was written. Rerun it."
            )
        return now - counted

    def counts_updates(self, info: TableInfo, keys: Sequence[str], partition: ColumnInfo | None) -> bool:
        """Whether this merge's upsert counts the rows it updates itself (MariaDB), so the window
        need not be counted before it: inserted = the source's rows less the updated ones. Read by
        `start_tally` and by the adapter's `upsert`, which build the counter together."""
        return False

    def reset_update_count(self, conn: Connection) -> None:
        """Zero the counter `counts_updates` promises, before the upsert (its start is the connection's)."""

    def updates_counted(self, result: Any) -> int:
        """The rows the upsert whose `result` this is updated, by the counter `counts_updates` promises."""
        raise NotImplementedError

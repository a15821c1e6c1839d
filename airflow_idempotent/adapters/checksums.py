"""The window checksum's statement, as a part of every engine adapter.

A write's result checksum is the window's row count and an order-independent combination of row
hashes, computed in the database (`window_checksum`) and formatted with the adapter's version
(`airflow_idempotent.checksum`, docs/checksum.md). `EngineAdapter` inherits these builders; an
adapter overrides `row_hash`, or `row_checksum` where its database has typed hashes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sqlglot import exp

from airflow_idempotent.adapters.rendered import rendered_once
from airflow_idempotent.adapters.schema import ColumnInfo
from airflow_idempotent.checksum import LEGACY_VERSION, format_checksum


class ChecksumStatements:
    """Builders of the window checksum; `table`, `column` and `in_window` come from EngineAdapter."""

    #: The definition `window_checksum` computes (docs/checksum.md): "v1" hashes each row's text
    #: form, "v2" combines the database's typed per-column hashes. Part of the checksum's text.
    checksum_version: ClassVar[str] = LEGACY_VERSION

    # ------------------------------------------------------------------ provided by EngineAdapter
    def table(self, name: str, alias: str | None = None) -> exp.Table:
        raise NotImplementedError

    def column(self, name: str, table: str | None = None) -> exp.Column:
        raise NotImplementedError

    def in_window(self, partition_column: str, table: str | None = None) -> exp.Expr:
        raise NotImplementedError

    def render(self, expression: exp.Expr | str, copy: bool = True) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------------ the checksum
    def row_hash(self, text: exp.Expr) -> exp.Expr:
        """A 64-bit (or narrower) integer hash of a text expression, computed by the database."""
        raise NotImplementedError

    def row_text(self, columns: Sequence[ColumnInfo]) -> exp.Expr:
        """The row's text form: each column as text ('<null>' for NULL), joined by '|'."""
        parts: list[exp.Expr] = []
        for i, col in enumerate(columns):
            if i:
                parts.append(exp.Literal.string("|"))
            parts.append(
                exp.func("COALESCE", exp.cast(self.column(col.name), "TEXT"), exp.Literal.string("<null>"))
            )
        return exp.Concat(expressions=parts, safe=True)

    def row_checksum(self, columns: Sequence[ColumnInfo]) -> exp.Expr:
        """One row's hash for the window checksum, columns in sorted order (`checksum_version` names it).

        The base is version 1: `row_hash` of the row's text form. Adapters whose database has typed
        hash functions override it (version 2), which skips the text conversion of every value.
        """
        return self.row_hash(self.row_text(columns))

    def hash_total(self, row_hash: exp.Expr) -> exp.Expr:
        """The exact, order-independent sum of `row_hash` over the rows (0 for none), as an aggregate.

        A plain SUM: each database's wide type holds it (docs/checksum.md). Spark overrides it, since
        its wide type, DECIMAL(38,0), costs a BigDecimal per row.
        """
        return exp.func("COALESCE", exp.Sum(this=row_hash), exp.Literal.number(0))

    def window_checksum(
        self, table: str, partition_column: str, columns: Sequence[str | ColumnInfo]
    ) -> exp.Select:
        """Row count and an order-independent sum of row hashes over the window, in the database.

        Compared only with checksums from the same database and version: it answers "is the
        window's result the same as after the last write", not "equal across engines". A column
        given by name alone is hashed as text.
        """
        infos = [c if isinstance(c, ColumnInfo) else ColumnInfo(c, "", "other", True) for c in columns]
        ordered = sorted(infos, key=lambda c: c.name.lower())
        return (
            exp.select(
                exp.Count(this=exp.Star()),
                self.hash_total(self.row_checksum(ordered)),
            )
            .from_(self.table(table), copy=False)
            .where(self.in_window(partition_column), copy=False)
        )

    def window_checksum_sql(
        self, table: str, partition_column: str, columns: Sequence[str | ColumnInfo]
    ) -> str:
        """`window_checksum` rendered, once per adapter class, table, partition column and columns
        in a process: the statement is a function of those alone (the builders read no connection
        or server state), and building and rendering it cost ~0.5-1 ms of CPU on every write and
        guarded check (#33). The columns are as the caller just reflected them, so a table altered
        between two writes is a new key, never a stale statement."""
        return rendered_once(
            (type(self), "window_checksum", table, partition_column, tuple(columns)),
            lambda: self.render(self.window_checksum(table, partition_column, columns), copy=False),
        )

    def checksum_text(self, count: int, total: object) -> str:
        """The checksum text of `window_checksum`'s result, tagged with this adapter's version."""
        return format_checksum(self.checksum_version, count, total)

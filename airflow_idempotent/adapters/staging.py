"""The statements of a guarded write (stage, diff, swap), as a part of every engine adapter.

A guarded write computes the window into a temporary staging table with the target's own column
types, diffs it with production by key in the database (one join, no FULL JOIN), and swaps or
repairs only the difference. `EngineAdapter` inherits these builders; an adapter overrides
`null_safe_distinct`, `sum_measure` or `prepare_connection` where its database differs, and sets
the two flags below.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from sqlalchemy.engine import Connection
from sqlglot import exp

from airflow_idempotent.adapters.schema import ColumnInfo, TableInfo


class StagingStatements:
    """Builders of the staging statements; `table`, `column` and `in_window` come from EngineAdapter."""

    #: Aliases of the staging table and of the target inside the staging statements.
    STAGING_ALIAS: ClassVar[str] = "_idem_stg"
    TARGET_ALIAS: ClassVar[str] = "_idem_tgt"
    #: A staging table is dropped with DROP TEMPORARY TABLE, the spelling that does not commit the
    #: transaction (MariaDB/MySQL); elsewhere DROP TABLE of a temporary table is transactional.
    drop_temporary_keyword: ClassVar[bool] = False
    #: How an UPDATE reads a second table: `UPDATE t SET .. FROM s WHERE ..` (PostgreSQL, SQLite
    #: >= 3.33, DuckDB) or `UPDATE t JOIN s ON .. SET ..` (MariaDB/MySQL).
    update_join_style: ClassVar[Literal["from", "join"]] = "from"

    # ------------------------------------------------------------------ provided by EngineAdapter
    engine: Any

    def execute(self, conn: Connection, expression: exp.Expr | str, params: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def table(self, name: str, alias: str | None = None) -> exp.Table:
        raise NotImplementedError

    def column(self, name: str, table: str | None = None) -> exp.Column:
        raise NotImplementedError

    def in_window(self, partition_column: str, table: str | None = None) -> exp.Expr:
        raise NotImplementedError

    def insert_select(
        self, table: str, columns: Sequence[str], query: exp.Expr, partition: ColumnInfo | None = None
    ) -> exp.Insert:
        raise NotImplementedError

    # ------------------------------------------------------------------ stage, diff, swap

    def drop_kept(self, table: str) -> None:
        """Drop a kept stage once decided (on_breach="approve"), in its own statement (on
        MariaDB a DROP TABLE commits); a failure is not raised (nothing is left to decide on)."""
        with contextlib.suppress(Exception), self.engine.begin() as conn:
            self.execute(conn, self.drop_staging(table, temporary=False), {})

    def prepare_connection(self, conn: Connection) -> None:
        """Per-connection setup a guarded write needs before its first statement (none here)."""

    def null_safe_distinct(self, left: exp.Expr, right: exp.Expr) -> exp.Expr:
        """True when two values differ, NULL counting as a value: `IS DISTINCT FROM` here."""
        return exp.NullSafeNEQ(this=left, expression=right)

    def sum_measure(self, value: exp.Expr) -> exp.Expr:
        """The exact sum of a measure column (DECIMAL sums are exact in the database)."""
        return exp.Sum(this=value)

    def _key_match(self, keys: Sequence[str], left: str, right: str) -> exp.Expr:
        return exp.and_(*[exp.EQ(this=self.column(k, left), expression=self.column(k, right)) for k in keys])

    def _any_distinct(self, columns: Sequence[str], left: str, right: str) -> exp.Expr:
        """Any of `columns` differs between the two aliases (NULL-safe); FALSE when there are none."""
        if not columns:
            return exp.false()
        return exp.paren(
            exp.or_(*[self.null_safe_distinct(self.column(c, left), self.column(c, right)) for c in columns])
        )

    def create_staging(
        self, name: str, table: str, columns: Sequence[str], temporary: bool = True
    ) -> exp.Create:
        """CREATE TEMPORARY TABLE name AS SELECT columns FROM table WHERE FALSE.

        The staging table gets the target's own column types, so the staged values are coerced
        exactly as the target would store them: the diff and checksum compare like with like.
        `temporary=False`: a table that outlives the session (a breached window's rows awaiting
        a person's approval).
        """
        select = exp.select(*[self.column(c) for c in columns]).from_(self.table(table)).where(exp.false())
        return exp.Create(
            kind="TABLE",
            this=self.table(name),
            expression=select,
            properties=exp.Properties(expressions=[exp.TemporaryProperty()]) if temporary else None,
        )

    def stage_window(
        self, name: str, table: str, info: TableInfo, columns: Sequence[str], query: exp.Expr
    ) -> list[exp.Expr]:
        """A preview's staging of a window's rows, typed like the target: a temporary table and its
        INSERT .. SELECT, in a transaction the preview rolls back (Spark: a cached view)."""
        return [self.create_staging(name, table, columns), self.insert_select(name, columns, query)]

    def drop_staging(self, name: str, temporary: bool = True) -> exp.Drop:
        """Drop a staging table without ending the transaction (see `drop_temporary_keyword`);
        `temporary=False`: a kept one (on MariaDB/MySQL that DROP commits: run it on its own)."""
        return exp.Drop(
            kind="TABLE",
            tables=[self.table(name)],
            exists=True,
            temporary=self.drop_temporary_keyword and temporary,
        )

    def select_columns(self, table: str, columns: Sequence[str]) -> exp.Select:
        """SELECT columns FROM table: a staging table as the query the existing checks run on."""
        return exp.select(*[self.column(c) for c in columns]).from_(self.table(table))

    def window_sums(self, table: str, partition_column: str | None, measures: Sequence[str]) -> exp.Select:
        """COUNT(*) and COALESCE(SUM(m), 0) per measure, over the window (or all of `table`)."""
        select = exp.select(
            exp.Count(this=exp.Star()),
            *[
                exp.func("COALESCE", self.sum_measure(self.column(m)), exp.Literal.number(0))
                for m in measures
            ],
        ).from_(self.table(table))
        return select.where(self.in_window(partition_column)) if partition_column else select

    def diff_matched(
        self,
        staging: str,
        table: str,
        partition_column: str,
        keys: Sequence[str],
        compare: Sequence[str],
    ) -> exp.Select:
        """Keys both in staging and in the target's window: how many, and how many differ.

        Added = staged - matched, removed = window - matched, unchanged = matched - changed; one
        join from the staging table to the target (whose key index it uses), no FULL JOIN.
        """
        stg, tgt = self.STAGING_ALIAS, self.TARGET_ALIAS
        changed = exp.Case(
            ifs=[exp.If(this=self._any_distinct(compare, stg, tgt), true=exp.Literal.number(1))],
            default=exp.Literal.number(0),
        )
        return (
            exp.select(
                exp.Count(this=exp.Star()),
                exp.func("COALESCE", exp.Sum(this=changed), exp.Literal.number(0)),
            )
            .from_(self.table(staging, stg))
            .join(self.table(table, tgt), on=self._key_match(keys, stg, tgt))
            .where(self.in_window(partition_column, tgt))
        )

    def update_changed(
        self,
        table: str,
        staging: str,
        partition_column: str,
        keys: Sequence[str],
        columns: Sequence[str],
    ) -> exp.Update:
        """Update the window's rows whose key is staged and whose values differ, and only those."""
        name = self.table(table).name  # the target's own name, unqualified, as MariaDB's UPDATE refers to it
        stg = self.STAGING_ALIAS
        compare = [c for c in columns if c.lower() not in {k.lower() for k in keys}]
        where = exp.and_(self.in_window(partition_column, name), self._any_distinct(compare, stg, name))
        if self.update_join_style == "join":
            target = self.table(table)
            target.set(
                "joins", [exp.Join(this=self.table(staging, stg), on=self._key_match(keys, name, stg))]
            )
            return exp.Update(
                this=target,
                expressions=[
                    exp.EQ(this=self.column(c, name), expression=self.column(c, stg)) for c in compare
                ],
                where=exp.Where(this=where),
            )
        return exp.Update(
            this=self.table(table),
            expressions=[exp.EQ(this=self.column(c), expression=self.column(c, stg)) for c in compare],
            from_=exp.From(this=self.table(staging, stg)),
            where=exp.Where(this=exp.and_(self._key_match(keys, name, stg), where)),
        )

    def insert_added(
        self,
        table: str,
        staging: str,
        partition_column: str,
        keys: Sequence[str],
        columns: Sequence[str],
    ) -> exp.Insert:
        """Insert the staged rows whose key the target's window does not have."""
        stg, tgt = self.STAGING_ALIAS, self.TARGET_ALIAS
        present = exp.Exists(
            this=exp.select(exp.Literal.number(1))
            .from_(self.table(table, tgt))
            .where(exp.and_(self._key_match(keys, tgt, stg), self.in_window(partition_column, tgt)))
        )
        select = (
            exp.select(*[self.column(c, stg) for c in columns])
            .from_(self.table(staging, stg))
            .where(exp.not_(present))
        )
        return exp.insert(
            select, self.table(table), columns=[exp.to_identifier(c, quoted=True) for c in columns]
        )

    def insert_from(self, table: str, staging: str, columns: Sequence[str]) -> exp.Insert:
        """INSERT INTO table (columns) SELECT columns FROM staging: the swap's second half."""
        return exp.insert(
            self.select_columns(staging, columns),
            self.table(table),
            columns=[exp.to_identifier(c, quoted=True) for c in columns],
        )

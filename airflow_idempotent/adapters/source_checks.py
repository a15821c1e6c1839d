"""The checks of a write's source before anything is written, as a part of every engine adapter.

One pass counts the source's rows, tells whether any falls outside the window and counts its
distinct and NULL keys (`source_profile`); the other queries run only when that pass found a
problem, to name the rows or keys in the refusal. `EngineAdapter` inherits these builders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sqlalchemy.engine import Connection
from sqlglot import exp

from airflow_idempotent.adapters.schema import TableInfo

#: The alias of the user's SELECT as a derived table (`EngineAdapter.source`).
SOURCE_ALIAS = "_idem_src"
#: The alias of the target table where a check joins the source with it.
TARGET_ALIAS = "_idem_tgt"
#: The type a refused partition value is cast to in `refuse_outside`, by the column's kind.
GUARD_TYPES = {"date": "DATE", "timestamp": "TIMESTAMP", "timestamptz": "TIMESTAMPTZ"}
#: The text of that failing cast: what the database's error quotes, should a diagnosis not run.
OUTSIDE_MARK = "airflow-idempotent: row outside the window: "


class SourceChecks:
    """Builders of the source checks; `column`, `in_window` and `source` come from EngineAdapter."""

    #: A row outside the window fails the write's own statement: the partition column's projection
    #: casts the marked text of any value outside the window (or NULL) to the column's type, which
    #: the database refuses (PostgreSQL: "invalid input syntax for type date"). A merge then needs
    #: no pass over its source before the upsert: with `upsert_refuses_repeated_keys` too, the
    #: upsert alone refuses every bad source and the passes run only to name what it refused
    #: (`strategies.merge`). Read by `EngineAdapter.insert_select`. Where a failing cast is only a
    #: warning (MariaDB outside strict mode, SQLite), or costs more than the pass, it stays off.
    #: MariaDB's two-row subquery (`failing_value`) fails in every mode, but there the projection's
    #: CASE costs what the pass does: server CPU at 1,000,000 rows, pass 130 + upsert 2,980 ms
    #: against 3,120 ms for the guarded upsert alone (100,000: 10 + 280 against 290), so it stays off.
    refuses_rows_outside_in_statement: ClassVar[bool] = False

    def table(self, name: str, alias: str | None = None) -> exp.Table:
        raise NotImplementedError

    def column(self, name: str, table: str | None = None) -> exp.Column:
        raise NotImplementedError

    def in_window(self, partition_column: str, table: str | None = None) -> exp.Expr:
        raise NotImplementedError

    def source(self, query: exp.Expr) -> exp.Subquery:
        raise NotImplementedError

    def describe(self, conn: Connection, table: str) -> TableInfo:
        raise NotImplementedError

    def source_unique_keys(self, conn: Connection, table: str) -> list[frozenset[str]]:
        """The lower-case column sets of `table`'s unique keys whose columns are all NOT NULL (its
        primary key among them): no two of its rows share one, none is NULL. Read by
        `unique_source.keys_provably_unique` for a merge's source table; from `describe`, which an
        adapter with a cheaper catalog query overrides this with."""
        info = self.describe(conn, table)
        return [
            key
            for key in info.unique_keys
            if key and all(c in info.columns and not info.columns[c].nullable for c in key)
        ]

    def refuse_outside(self, partition_column: str, kind: str) -> exp.Expr:
        """The source's partition value, or a cast that fails for a value outside the window or NULL.

        `CASE WHEN p >= :window_start AND p < :window_end THEN p ELSE CAST(CONCAT(mark, p) AS type) END`:
        the CASE is evaluated per row the SELECT returns (after its own filters), and its ELSE
        depends on the row, so no planner folds it into an error before any row is read. CONCAT (the
        function, not `||`) turns a NULL into '', so a NULL fails the cast too.
        """
        col = self.column(partition_column, SOURCE_ALIAS)
        return exp.Case(
            ifs=[exp.If(this=self.in_window(partition_column, SOURCE_ALIAS), true=col)],
            default=self.failing_value(col.copy(), kind),
        )

    def failing_value(self, value: exp.Expr, kind: str) -> exp.Expr:
        """An expression that fails the statement when evaluated, for a row-dependent `value` (so
        no planner folds it into an error before any row is read): a cast of marked text to the
        partition column's type, which PostgreSQL and DuckDB refuse. MariaDB and SQLite, where a
        failed cast is NULL or a warning, override it."""
        return exp.cast(
            exp.Anonymous(this="CONCAT", expressions=[exp.Literal.string(OUTSIDE_MARK), value]),
            GUARD_TYPES[kind],
        )

    def stay_in_window(self, table: str, partition_column: str, kind: str, new_value: exp.Expr) -> exp.Expr:
        """The upsert's SET for the partition column: the new value where the existing row lies in
        the window, else a failure (`failing_value`). A merge of one window must not move a row out
        of another window, which it neither locks nor records; the database refuses it in the
        statement, evaluated only for rows the upsert updates, and `strategies.merge` names the keys.

        A guard that costs, kept for want of a cheaper one: on MariaDB, updating 1,000,000 rows,
        the server's CPU was 2,990 ms with it, 2,810 without (the hand-written upsert 2,760); IF(),
        the negated CASE and an ELSE NULL cost the same (2,980-3,050 ms).
        """
        held = self.column(partition_column, table)
        return exp.Case(
            ifs=[exp.If(this=self.in_window(partition_column, table), true=new_value)],
            default=self.failing_value(held.copy(), kind),
        )

    def key_problems(
        self, query: exp.Expr, keys: Sequence[str], partition_column: str | None, limit: int
    ) -> exp.Select:
        """Source keys that are NULL or repeated, or whose rows fall outside the window: one pass."""
        key_cols = [self.column(k, SOURCE_ALIAS) for k in keys]
        count = exp.Count(this=exp.Star())
        null_any = exp.or_(*[exp.Is(this=c.copy(), expression=exp.null()) for c in key_cols])
        problems: list[exp.Expr] = [
            exp.GT(this=count.copy(), expression=exp.Literal.number(1)),
            null_any,
        ]
        selects: list[exp.Expr] = [*key_cols, exp.alias_(count, "n")]
        if partition_column:
            outside = exp.Case(
                ifs=[exp.If(this=self.in_window(partition_column, SOURCE_ALIAS), true=exp.Literal.number(0))],
                default=exp.Literal.number(1),
            )
            selects.append(exp.alias_(exp.Max(this=outside), "outside"))
            problems.append(exp.EQ(this=exp.Max(this=outside.copy()), expression=exp.Literal.number(1)))
        else:
            selects.append(exp.alias_(exp.Literal.number(0), "outside"))
        return (
            exp.select(*selects)
            .from_(self.source(query), copy=False)
            .group_by(*[c.copy() for c in key_cols], copy=False)
            .having(exp.or_(*problems), copy=False)
            .order_by(*[c.copy() for c in key_cols], copy=False)
            .limit(limit, copy=False)
        )

    def source_profile(
        self, query: exp.Expr, partition_column: str | None, keys: Sequence[str] = ()
    ) -> exp.Select:
        """One pass over the source: its row count, whether rows fall outside the window (1 or 0)
        and, with `keys`, how many distinct non-NULL keys and how many rows with a NULL key part it has.

        With keys, the merge's key check costs no pass of its own: the source is clean when the
        distinct keys equal the rows and no key is NULL (`key_problems` then names the bad ones).
        The window is checked on the aggregates (`MIN`, `MAX` and the NULLs of the partition column
        against the bounds), not row by row: on MariaDB at 1,000,000 rows the pass took 111 ms
        against 181 ms with a CASE per row (the source's `COUNT(*)` alone 104 ms); `count_outside`
        counts the rows for the refusal.
        """
        outside: exp.Expr = exp.Literal.number(0)
        if partition_column is not None:
            col = self.column(partition_column, SOURCE_ALIAS)
            miss = exp.or_(
                exp.LT(this=exp.Count(this=col.copy()), expression=exp.Count(this=exp.Star())),
                exp.LT(this=exp.Min(this=col.copy()), expression=exp.Placeholder(this="window_start")),
                exp.GTE(this=exp.Max(this=col.copy()), expression=exp.Placeholder(this="window_end")),
            )
            outside = exp.Case(
                ifs=[exp.If(this=miss, true=exp.Literal.number(1))], default=exp.Literal.number(0)
            )
        selects: list[exp.Expr] = [exp.Count(this=exp.Star()), outside]
        if keys:
            key_cols = [self.column(k, SOURCE_ALIAS) for k in keys]
            selects.append(exp.Count(this=exp.Distinct(expressions=key_cols)))
            if len(key_cols) == 1:  # COUNT(k) skips the NULLs: no CASE per row
                nulls: exp.Expr = exp.Sub(
                    this=exp.Count(this=exp.Star()), expression=exp.Count(this=key_cols[0].copy())
                )
            else:
                null_any = exp.or_(*[exp.Is(this=c.copy(), expression=exp.null()) for c in key_cols])
                nulls = exp.Count(this=exp.Case(ifs=[exp.If(this=null_any, true=exp.Literal.number(1))]))
            selects.append(nulls)
        return exp.select(*selects).from_(self.source(query), copy=False)

    def count_outside(self, query: exp.Expr, partition_column: str) -> exp.Select:
        """How many of the source's rows fall outside the window (or have no partition value)."""
        col = self.column(partition_column, SOURCE_ALIAS)
        miss = exp.or_(
            exp.not_(exp.paren(self.in_window(partition_column, SOURCE_ALIAS))),
            exp.Is(this=col.copy(), expression=exp.null()),
        )
        return (
            exp.select(exp.Count(this=exp.Star()))
            .from_(self.source(query), copy=False)
            .where(miss, copy=False)
        )

    def count_source(self, query: exp.Expr) -> exp.Select:
        return exp.select(exp.Count(this=exp.Star())).from_(self.source(query), copy=False)

    def outside_sample(self, query: exp.Expr, partition_column: str, limit: int) -> exp.Select:
        """A few partition values the SELECT produced outside the window, to name them in the error."""
        col = self.column(partition_column, SOURCE_ALIAS)
        return (
            exp.select(col)
            .from_(self.source(query), copy=False)
            .where(
                exp.not_(exp.paren(self.in_window(partition_column, SOURCE_ALIAS))).or_(
                    exp.Is(this=col.copy(), expression=exp.null())
                ),
                copy=False,
            )
            .limit(limit, copy=False)
        )

    def keys_held_outside(
        self, table: str, query: exp.Expr, keys: Sequence[str], partition_column: str, limit: int
    ) -> exp.Select:
        """The SELECT's keys that `table` holds in a row outside the window (or with no partition
        value): rows an overwrite of the window does not delete, so its INSERT breaks the key."""
        pairs = [(self.column(k, SOURCE_ALIAS), self.column(k, TARGET_ALIAS)) for k in keys]
        on = exp.and_(*[exp.EQ(this=src, expression=tgt) for src, tgt in pairs])
        held = self.column(partition_column, TARGET_ALIAS)
        outside = exp.or_(
            exp.not_(exp.paren(self.in_window(partition_column, TARGET_ALIAS))),
            exp.Is(this=held.copy(), expression=exp.null()),
        )
        return (
            exp.select(*[self.column(k, TARGET_ALIAS) for k in keys], held)
            .from_(self.source(query), copy=False)
            .join(self.table(table, TARGET_ALIAS), on=on, copy=False)
            .where(outside, copy=False)
            .order_by(*[self.column(k, TARGET_ALIAS) for k in keys], copy=False)
            .limit(limit, copy=False)
        )

    def merge_source_problems(
        self, table: str, query: exp.Expr, keys: Sequence[str], partition_column: str, limit: int
    ) -> exp.Select:
        """`key_problems` and `keys_held_outside` in one query, for an engine whose MERGE checks
        neither (Spark): the source grouped by key (its row count, whether a row falls outside the
        window), left-joined to the table's rows outside the window holding that key. Each row:
        the keys, `n`, `outside`, `held` (1 when the table holds the key outside the window) and the
        partition value it is held at; the repeated or NULL keys first, then rows outside the
        window, then keys held outside, as the refusals run (`spark.merges.check_merge_source`).

        On Spark one job instead of two, and the held keys join the source already grouped by key
        (shuffled once) instead of the source scanned and shuffled again."""
        grouped = self.key_problems(query, keys, partition_column, limit)
        for clause in ("having", "order", "limit"):
            grouped.set(clause, None)
        src = "_idem_keys"
        on = exp.and_(
            *[exp.EQ(this=self.column(k, src), expression=self.column(k, TARGET_ALIAS)) for k in keys]
        )
        held_at = self.column(partition_column, TARGET_ALIAS)
        elsewhere = exp.or_(
            exp.not_(exp.paren(self.in_window(partition_column, TARGET_ALIAS))),
            exp.Is(this=held_at.copy(), expression=exp.null()),
        )
        is_held = exp.not_(exp.Is(this=self.column(keys[0], TARGET_ALIAS), expression=exp.null()))
        repeated = exp.or_(
            exp.GT(this=self.column("n", src), expression=exp.Literal.number(1)),
            *[exp.Is(this=self.column(k, src), expression=exp.null()) for k in keys],
        )
        outside = exp.EQ(this=self.column("outside", src), expression=exp.Literal.number(1))
        rank = exp.Case(
            ifs=[
                exp.If(this=repeated.copy(), true=exp.Literal.number(0)),
                exp.If(this=outside.copy(), true=exp.Literal.number(1)),
            ],
            default=exp.Literal.number(2),
        )
        flag = exp.Case(
            ifs=[exp.If(this=is_held.copy(), true=exp.Literal.number(1))], default=exp.Literal.number(0)
        )
        return (
            exp.select(
                *[self.column(k, src) for k in keys],
                self.column("n", src),
                self.column("outside", src),
                exp.alias_(flag, "held"),
                held_at.copy(),
            )
            .from_(grouped.subquery(src, copy=False), copy=False)
            .join(
                self.table(table, TARGET_ALIAS),
                on=exp.and_(on, exp.paren(elsewhere)),
                join_type="left",
                copy=False,
            )
            .where(exp.or_(repeated, outside, is_held), copy=False)
            .order_by(rank, *[self.column(k, src) for k in keys], copy=False)
            .limit(limit, copy=False)
        )

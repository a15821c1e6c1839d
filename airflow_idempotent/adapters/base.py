"""The engine adapter: per-database SQL built as sqlglot expressions, capabilities as flags.

Operators and strategies never hold SQL strings: they ask the adapter for an expression,
and the adapter renders it in its own dialect with `:name` bound parameters (SQLAlchemy's
`text()` style), so values are always bound and identifiers always validated and quoted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, ClassVar, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlglot import exp

from airflow_idempotent.errors import InvalidIdentifierError, LockTimeoutError, SchemaError, SqlParseError
from airflow_idempotent.window import Window

IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
SOURCE_ALIAS = "_idem_src"

ColumnKind = Literal["date", "timestamp", "timestamptz", "other"]


def validate_identifier(name: str, what: str = "identifier") -> str:
    """Return `name` if it is a plain identifier, else refuse it: it might carry SQL."""
    if not isinstance(name, str) or not IDENTIFIER_RE.fullmatch(name):
        raise InvalidIdentifierError(
            f"{what} {name!r} is not a plain identifier: use letters, digits and underscores, "
            "starting with a letter or underscore, at most 63 characters (e.g. 'payouts'). "
            "Names are quoted by the adapter; SQL inside a name is never accepted."
        )
    return name


def split_table_name(name: str) -> tuple[str | None, str]:
    """Split `schema.table` (or `table`) into validated parts."""
    if not isinstance(name, str):
        raise InvalidIdentifierError(f"table name must be a string, got {type(name).__name__}")
    parts = name.split(".")
    if len(parts) > 2:
        raise InvalidIdentifierError(
            f"table name {name!r} has more than one dot: give 'table' or 'schema.table'."
        )
    if len(parts) == 2:
        return validate_identifier(parts[0], "schema name"), validate_identifier(parts[1], "table name")
    return None, validate_identifier(parts[0], "table name")


@dataclass(frozen=True)
class ColumnInfo:
    """A target column as reflected from the database."""

    name: str
    type_name: str
    kind: ColumnKind
    nullable: bool


@dataclass(frozen=True)
class TableInfo:
    """What the strategies need to know about a target table before writing to it."""

    schema: str | None
    name: str
    columns: Mapping[str, ColumnInfo]  # keyed by lower-case name
    unique_keys: tuple[frozenset[str], ...]  # lower-case column sets of the PK and unique indexes

    def column(self, name: str, role: str) -> ColumnInfo:
        """The column called `name` (case-insensitive), or a SchemaError naming the choices."""
        info = self.columns.get(name.lower())
        if info is None:
            raise SchemaError(
                f"{role} {name!r} is not a column of {self.qualified}: its columns are "
                f"{', '.join(c.name for c in self.columns.values())}. Fix the operator's {role}."
            )
        return info

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


class EngineAdapter:
    """Base adapter. Subclasses set the flags and override what their database does differently."""

    #: sqlglot dialect name used to parse user SQL and render ours.
    dialect: ClassVar[str]
    #: How an upsert is spelled: INSERT .. ON CONFLICT, INSERT .. ON DUPLICATE KEY UPDATE, or MERGE.
    upsert_style: ClassVar[Literal["on_conflict", "on_duplicate_key", "merge"]] = "on_conflict"
    #: How concurrent attempts on one (table, window) are kept apart.
    lock_style: ClassVar[Literal["advisory_xact", "get_lock", "file"]] = "file"
    #: INSERT .. SELECT .. ON CONFLICT needs a WHERE in the SELECT to parse (SQLite's ambiguity).
    upsert_select_needs_where: ClassVar[bool] = False
    #: Date and timestamp values are bound as ISO text (the database stores them as text).
    binds_temporal_as_text: ClassVar[bool] = False
    #: DDL is transactional, so a failed write can roll back a CREATE too.
    transactional_ddl: ClassVar[bool] = True
    #: A staging table is dropped with DROP TEMPORARY TABLE, the spelling that does not commit the
    #: transaction (MariaDB/MySQL); elsewhere DROP TABLE of a temporary table is transactional.
    drop_temporary_keyword: ClassVar[bool] = False
    #: How an UPDATE reads a second table: `UPDATE t SET .. FROM s WHERE ..` (PostgreSQL, SQLite
    #: >= 3.33, DuckDB) or `UPDATE t JOIN s ON .. SET ..` (MariaDB/MySQL).
    update_join_style: ClassVar[Literal["from", "join"]] = "from"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # ------------------------------------------------------------------ identifiers
    def table(self, name: str, alias: str | None = None) -> exp.Table:
        """A quoted table expression from a validated `table` or `schema.table`."""
        schema, table = split_table_name(name)
        return exp.Table(
            this=exp.to_identifier(table, quoted=True),
            db=exp.to_identifier(schema, quoted=True) if schema else None,
            alias=exp.TableAlias(this=exp.to_identifier(alias)) if alias else None,
        )

    def column(self, name: str, table: str | None = None) -> exp.Column:
        """A quoted column expression from a validated name."""
        validate_identifier(name, "column name")
        return exp.column(
            exp.to_identifier(name, quoted=True),
            table=exp.to_identifier(table, quoted=True) if table else None,
        )

    # ------------------------------------------------------------------ rendering
    def render(self, expression: exp.Expr) -> str:
        """Render in this dialect, keeping `:name` placeholders for SQLAlchemy to bind."""

        def to_colon(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Placeholder):
                if not node.name or node.name == "?":
                    raise SqlParseError(
                        "positional placeholders (?, %s, $1) cannot be bound by name: "
                        "use named ones such as :window_start, :window_end or :my_param."
                    )
                return exp.var(f":{node.name}")
            return node

        return expression.transform(to_colon, copy=True).sql(dialect=self.dialect)

    def execute(self, conn: Connection, expression: exp.Expr, params: Mapping[str, Any]) -> Any:
        """Run one expression with bound parameters and return SQLAlchemy's result."""
        return conn.execute(sa.text(self.render(expression)), dict(params))

    # ------------------------------------------------------------------ connections
    @contextmanager
    def locked_transaction(self, table: str, window: Window, timeout: float) -> Iterator[Connection]:
        """One transaction holding the (table, window) lock: commit on success, roll back on error.

        Two attempts on one window (a zombie and its retry, a scheduled run and a backfill) never
        interleave; the loser waits at most `timeout` seconds, then raises LockTimeoutError.
        """
        with self.engine.begin() as conn:
            self.acquire_lock(conn, table, window, timeout)
            yield conn

    def acquire_lock(self, conn: Connection, table: str, window: Window, timeout: float) -> None:
        """Take a lock released by the end of the transaction; subclasses implement it."""
        raise NotImplementedError

    @staticmethod
    def lock_timeout_error(table: str, window: Window, timeout: float, how: str) -> LockTimeoutError:
        return LockTimeoutError(
            f"another attempt has been writing {table} for window {window.label()} for more than "
            f"{timeout:g} s ({how}): wait for it to finish, or raise the operator's lock_timeout."
        )

    @staticmethod
    def lock_name(table: str, window: Window) -> str:
        """A stable name for the (table, window) lock, short enough for every database."""
        digest = hashlib.sha256(f"{table.lower()}|{window.label()}".encode()).hexdigest()
        return f"idem_{digest[:40]}"

    @staticmethod
    def lock_key(table: str, window: Window) -> int:
        """A signed 64-bit key for the (table, window) lock (PostgreSQL advisory locks)."""
        digest = hashlib.sha256(f"{table.lower()}|{window.label()}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    # ------------------------------------------------------------------ introspection
    def describe(self, conn: Connection, table: str) -> TableInfo:
        """Reflect the target's columns and unique keys; an unknown table is a SchemaError."""
        schema, name = split_table_name(table)
        inspector = sa.inspect(conn)
        if not inspector.has_table(name, schema=schema):
            raise SchemaError(
                f"table {table!r} does not exist in this connection's database: create it first "
                "(the example DAGs create theirs with a CREATE TABLE task), or fix the table name."
            )
        columns: dict[str, ColumnInfo] = {}
        for col in inspector.get_columns(name, schema=schema):
            columns[col["name"].lower()] = ColumnInfo(
                name=col["name"],
                type_name=str(col["type"]),
                kind=self.column_kind(col["type"]),
                nullable=bool(col.get("nullable", True)),
            )
        keys: list[frozenset[str]] = []
        pk = inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or []
        if pk:
            keys.append(frozenset(c.lower() for c in pk))
        for index in inspector.get_indexes(name, schema=schema):
            if index.get("unique"):
                keys.append(frozenset(str(c).lower() for c in index["column_names"] if c))
        for constraint in inspector.get_unique_constraints(name, schema=schema):
            keys.append(frozenset(c.lower() for c in constraint["column_names"]))
        return TableInfo(schema=schema, name=name, columns=columns, unique_keys=tuple(keys))

    def column_kind(self, type_: Any) -> ColumnKind:
        """Classify a reflected type: what a window bound must be bound as to compare with it."""
        if isinstance(type_, sa.DateTime):
            return "timestamptz" if getattr(type_, "timezone", False) else "timestamp"
        if isinstance(type_, sa.Date):
            return "date"
        return "other"

    # ------------------------------------------------------------------ values
    def window_params(self, window: Window, kind: ColumnKind) -> dict[str, Any]:
        """The window bounds as values comparable with a partition column of `kind`."""
        start: date | datetime
        end: date | datetime
        if kind == "date":
            start, end = window.start_date(), window.end_date()
        elif kind == "timestamp":
            start, end = window.naive_start(), window.naive_end()
        elif kind == "timestamptz":
            start, end = window.start, window.end
        else:
            raise SchemaError(
                f"partition column type is not a date or timestamp (got kind {kind!r}): "
                "partition by a DATE or TIMESTAMP column, so the window can select it."
            )
        if self.binds_temporal_as_text:
            return {"window_start": self.temporal_text(start), "window_end": self.temporal_text(end)}
        return {"window_start": start, "window_end": end}

    @staticmethod
    def temporal_text(value: date | datetime) -> str:
        """ISO text as text-typed date columns store it ('2026-08-25', '2026-08-25 00:00:00')."""
        if isinstance(value, datetime):
            return value.isoformat(sep=" ")
        return value.isoformat()

    # ------------------------------------------------------------------ SQL builders
    def in_window(self, partition_column: str, table: str | None = None) -> exp.Expr:
        """`partition >= :window_start AND partition < :window_end`: the half-open window."""
        col = self.column(partition_column, table)
        return exp.and_(
            exp.GTE(this=col, expression=exp.Placeholder(this="window_start")),
            exp.LT(this=col.copy(), expression=exp.Placeholder(this="window_end")),
        )

    def source(self, query: exp.Expr) -> exp.Subquery:
        """The user's SELECT as an aliased derived table."""
        if not isinstance(query, exp.Query):
            raise SqlParseError(
                f"the sql must be a SELECT (or WITH ... SELECT), got a {query.key.upper()} statement: "
                "the operator writes the rows itself, give only the query that produces them."
            )
        return query.subquery(SOURCE_ALIAS, copy=True)

    def probe_columns(self, query: exp.Expr) -> exp.Select:
        """A query returning no rows whose result columns are the user's SELECT's columns."""
        return exp.select("*").from_(self.source(query)).where(exp.false()).limit(0)

    def delete_window(self, table: str, partition_column: str) -> exp.Delete:
        return exp.delete(self.table(table), where=self.in_window(partition_column))

    def count_window(self, table: str, partition_column: str) -> exp.Select:
        return (
            exp.select(exp.Count(this=exp.Star()))
            .from_(self.table(table))
            .where(self.in_window(partition_column))
        )

    def insert_select(self, table: str, columns: Sequence[str], query: exp.Expr) -> exp.Insert:
        """INSERT INTO table (cols) SELECT cols FROM (query): set-based, rows never leave the database."""
        select = exp.select(*[self.column(c, SOURCE_ALIAS) for c in columns]).from_(self.source(query))
        if self.upsert_select_needs_where:
            select = select.where(exp.true())
        return exp.insert(
            select, self.table(table), columns=[exp.to_identifier(c, quoted=True) for c in columns]
        )

    def upsert(self, table: str, columns: Sequence[str], keys: Sequence[str], query: exp.Expr) -> exp.Expr:
        """Insert new keys, update existing ones, in the database's native upsert."""
        insert = self.insert_select(table, columns, query)
        updates = [c for c in columns if c.lower() not in {k.lower() for k in keys}] or list(keys)
        insert.set("conflict", self.on_conflict(keys, updates))
        return insert

    def on_conflict(self, keys: Sequence[str], updates: Sequence[str]) -> exp.OnConflict:
        """ON CONFLICT (keys) DO UPDATE SET c = excluded.c (PostgreSQL, SQLite, DuckDB)."""
        return exp.OnConflict(
            conflict_keys=[exp.to_identifier(k, quoted=True) for k in keys],
            action=exp.var("DO UPDATE"),
            expressions=[exp.EQ(this=self.column(c), expression=self.column(c, "excluded")) for c in updates],
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
            .from_(self.source(query))
            .group_by(*[c.copy() for c in key_cols])
            .having(exp.or_(*problems))
            .order_by(*[c.copy() for c in key_cols])
            .limit(limit)
        )

    def count_source(self, query: exp.Expr) -> exp.Select:
        return exp.select(exp.Count(this=exp.Star())).from_(self.source(query))

    def outside_sample(self, query: exp.Expr, partition_column: str, limit: int) -> exp.Select:
        """A few partition values the SELECT produced outside the window, to name them in the error."""
        col = self.column(partition_column, SOURCE_ALIAS)
        return (
            exp.select(col)
            .from_(self.source(query))
            .where(
                exp.not_(exp.paren(self.in_window(partition_column, SOURCE_ALIAS))).or_(
                    exp.Is(this=col.copy(), expression=exp.null())
                )
            )
            .limit(limit)
        )

    def row_hash(self, text: exp.Expr) -> exp.Expr:
        """A 64-bit (or narrower) integer hash of a text expression, computed by the database."""
        raise NotImplementedError

    def window_checksum(self, table: str, partition_column: str, columns: Sequence[str]) -> exp.Select:
        """Row count and an order-independent sum of row hashes over the window, in the database.

        Compared only with checksums from the same database: it answers "is the window's result
        the same as after the last write", not "equal across engines".
        """
        parts: list[exp.Expr] = []
        for i, name in enumerate(sorted(columns, key=str.lower)):
            if i:
                parts.append(exp.Literal.string("|"))
            parts.append(
                exp.func("COALESCE", exp.cast(self.column(name), "TEXT"), exp.Literal.string("<null>"))
            )
        row_text = exp.Concat(expressions=parts, safe=True)
        return (
            exp.select(
                exp.Count(this=exp.Star()),
                exp.func("COALESCE", exp.Sum(this=self.row_hash(row_text)), exp.Literal.number(0)),
            )
            .from_(self.table(table))
            .where(self.in_window(partition_column))
        )

    def delete_missing(
        self, table: str, partition_column: str, keys: Sequence[str], query: exp.Expr
    ) -> exp.Delete:
        """Delete the window's rows whose key the source no longer has (merge with delete_missing)."""
        _, name = split_table_name(table)
        match = exp.and_(
            *[exp.EQ(this=self.column(k, SOURCE_ALIAS), expression=self.column(k, name)) for k in keys]
        )
        exists = exp.Exists(this=exp.select(exp.Literal.number(1)).from_(self.source(query)).where(match))
        return exp.delete(
            self.table(table),
            where=exp.and_(self.in_window(partition_column, name), exp.not_(exists)),
        )

    # ------------------------------------------------------------------ staging: stage, diff, swap
    #: Aliases of the staging table and of the target inside the staging statements.
    STAGING_ALIAS: ClassVar[str] = "_idem_stg"
    TARGET_ALIAS: ClassVar[str] = "_idem_tgt"

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

    def create_staging(self, name: str, table: str, columns: Sequence[str]) -> exp.Create:
        """CREATE TEMPORARY TABLE name AS SELECT columns FROM table WHERE FALSE.

        The staging table gets the target's own column types, so the staged values are coerced
        exactly as the target would store them: the diff and checksum compare like with like.
        """
        select = exp.select(*[self.column(c) for c in columns]).from_(self.table(table)).where(exp.false())
        return exp.Create(
            kind="TABLE",
            this=self.table(name),
            expression=select,
            properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
        )

    def drop_staging(self, name: str) -> exp.Drop:
        """Drop a staging table without ending the transaction (see `drop_temporary_keyword`)."""
        return exp.Drop(
            kind="TABLE", tables=[self.table(name)], exists=True, temporary=self.drop_temporary_keyword
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
        _, name = split_table_name(table)
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

"""The engine adapter: per-database SQL built as sqlglot expressions, capabilities as flags.

Operators and strategies never hold SQL strings: they ask the adapter for an expression,
and the adapter renders it in its own dialect with `:name` bound parameters (SQLAlchemy's
`text()` style), so values are always bound and identifiers always validated and quoted.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from airflow_idempotent.adapters import locks
from airflow_idempotent.adapters.checksums import ChecksumStatements
from airflow_idempotent.adapters.early import EarlyConnect
from airflow_idempotent.adapters.identifiers import split_table_name, table_parts, validate_identifier
from airflow_idempotent.adapters.insert_counts import InsertCounts
from airflow_idempotent.adapters.late import LateClose
from airflow_idempotent.adapters.locks import LockId, LockStyle
from airflow_idempotent.adapters.rendered import rendered_once
from airflow_idempotent.adapters.schema import ColumnInfo, ColumnKind, TableInfo
from airflow_idempotent.adapters.source_checks import SOURCE_ALIAS, SourceChecks
from airflow_idempotent.adapters.staging import StagingStatements
from airflow_idempotent.errors import (
    LockTimeoutError,
    SchemaError,
    SqlParseError,
    UnsupportedConnectionError,
)
from airflow_idempotent.lint.sql import parsed_statement
from airflow_idempotent.window import Window, spanning


@functools.cache
def binding_dialect(name: str) -> Dialect:
    """The sqlglot dialect `name`, writing named placeholders as SQLAlchemy's `:name` (PostgreSQL's
    own spelling is `%(name)s`, DuckDB's `$name`) and refusing positional ones (?, %s, $1)."""
    base = type(Dialect.get_or_raise(name))

    class Generator(base.Generator):  # type: ignore[name-defined,misc]
        def placeholder_sql(self, expression: exp.Placeholder) -> str:
            if not expression.name or expression.name == "?":
                raise SqlParseError(
                    "positional placeholders (?, %s, $1) cannot be bound by name: "
                    "use named ones such as :window_start, :window_end or :my_param."
                )
            return f":{expression.name}"

    dialect: type[Dialect] = type(f"IdemBinding{base.__name__}", (base,), {"Generator": Generator})
    return dialect()


def missing_table(table: str) -> SchemaError:
    """The refusal of a target the connection's database does not have."""
    return SchemaError(
        f"table {table!r} does not exist in this connection's database: create it first "
        "(the example DAGs create theirs with a CREATE TABLE task), or fix the table name."
    )


def rowcount(result: Any) -> int:
    """A statement's row count, or -1 where the driver cannot count (callers then count otherwise)."""
    count = result.rowcount
    return int(count) if count is not None and count >= 0 else -1


@functools.cache
def insert_if_absent_statement(
    dialect: str, upsert_style: str, table: sa.Table, names: tuple[str, ...]
) -> sa.TextClause:
    """`EngineAdapter.insert_if_absent`'s statement: `INSERT .. ON CONFLICT DO NOTHING`, or
    MariaDB's `INSERT IGNORE`, built with sqlglot and rendered once per (dialect, table, columns);
    it ran on every history record, approval and fence, where building and rendering the tree
    cost more than the round trip."""
    for name in names:
        validate_identifier(name, "column name")
    insert = exp.insert(
        exp.values([tuple(exp.Placeholder(this=name) for name in names)]),
        exp.Table(this=exp.to_identifier(validate_identifier(table.name, "table name"), quoted=True)),
        columns=[exp.to_identifier(name, quoted=True) for name in names],
    )
    if upsert_style == "on_duplicate_key":
        insert.set("ignore", True)
    else:
        insert.set("conflict", exp.OnConflict(action=exp.var("DO NOTHING")))
    rendered = insert.sql(dialect=binding_dialect(dialect), copy=False)
    return sa.text(rendered).bindparams(*(sa.bindparam(name, type_=table.c[name].type) for name in names))


class EngineAdapter(
    SourceChecks, StagingStatements, ChecksumStatements, InsertCounts, EarlyConnect, LateClose
):
    """Base adapter. Subclasses set the flags and override what their database does differently.

    The flags drive the base class: `upsert_style` picks the upsert and insert-if-absent
    spellings, `lock_style` the lock implementation (`locks`), `hosts_history_store` whether the
    history store may live there, the others one statement each.
    """

    #: sqlglot dialect name used to parse user SQL and render ours.
    dialect: ClassVar[str]
    #: How an upsert and an insert-if-absent are spelled (read by `on_conflict`, `insert_if_absent`):
    #: `INSERT .. ON CONFLICT` (PostgreSQL, SQLite, DuckDB) or `INSERT .. ON DUPLICATE KEY UPDATE` /
    #: `INSERT IGNORE` (MariaDB/MySQL).
    upsert_style: ClassVar[Literal["on_conflict", "on_duplicate_key"]]
    #: How concurrent attempts are kept apart (read by `locked_transaction`, `session_lock`):
    #: advisory locks, named locks (GET_LOCK) or a flock beside the database file (see `locks`).
    lock_style: ClassVar[LockStyle]
    #: The database can hold the history store and its effect ledger (many small transactions
    #: and row locks); read by `HistoryStore.migrate`.
    hosts_history_store: ClassVar[bool] = True
    #: INSERT .. SELECT .. ON CONFLICT needs a WHERE in the SELECT to parse (SQLite's ambiguity).
    upsert_select_needs_where: ClassVar[bool] = False
    #: Date and timestamp values are bound as ISO text (the database stores them as text).
    binds_temporal_as_text: ClassVar[bool] = False
    #: DDL is transactional, so a failed write can roll back a CREATE too.
    transactional_ddl: ClassVar[bool] = True
    # drop_temporary_keyword, update_join_style: the staging statements' flags (see `staging`)
    #: Several statements commit or roll back together. Without it an overwrite is the partition
    #: switch of `airflow_idempotent.spark.switch` (stage, verify, switch in the catalog).
    supports_transactions: ClassVar[bool] = True
    #: A merge (upsert) can be done on the engine's tables; `merge_refusal` says why not otherwise.
    supports_merge: ClassVar[bool] = True
    merge_refusal: ClassVar[str] = ""
    #: Why a table of this engine cannot take lookback, when one cannot (`lookback_refused`); every
    #: engine's transactional writes can, and Spark's depends on the table's format.
    lookback_refusal: ClassVar[str] = ""
    #: The engine can lock a (table, window) itself; otherwise the lock is held in the history store.
    has_native_lock: ClassVar[bool] = True
    #: The native upsert itself fails on a source holding one key twice (PostgreSQL's ON CONFLICT
    #: DO UPDATE "cannot affect row a second time"), in the statement, before anything commits.
    #: With NOT NULL key columns (which every engine enforces) a merge then skips its key
    #: pre-check pass and runs it only to name the keys after such a failure (`strategies.merge`).
    upsert_refuses_repeated_keys: ClassVar[bool] = False
    #: The native upsert keeps one row per repeated key and its row count is the number of distinct
    #: target rows it wrote (DuckDB's ON CONFLICT), so a count below the source's reveals repeated
    #: keys after the statement, inside the transaction: no key pass before it (`strategies.merge`).
    upsert_counts_distinct_rows: ClassVar[bool] = False
    #: The upsert fails on a row it would move into the window from outside it, in the statement
    #: (`stay_in_window` as the partition column's SET, read by `on_conflict`). DuckDB evaluates
    #: DO UPDATE's SET for inserted rows too (with NULL existing values), so there the update's
    #: WHERE skips such a row instead and the upsert's row count falls short of the source's
    #: (`strategies.merge` compares them).
    refuses_moves_in_statement: ClassVar[bool] = True
    #: COUNT(DISTINCT a, b) works on a tuple of columns (SQLite's takes one): read by `source_profile`'s
    #: callers to fold a multi-column key's check into the source's count.
    counts_distinct_tuples: ClassVar[bool] = True

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def check_merge_supported(self, table: str) -> None:
        """Refuse a merge on an engine that cannot do one, before anything runs, naming the alternative."""
        if not self.supports_merge:
            raise self.merge_refused(table)

    def merge_refused(self, table: str) -> UnsupportedConnectionError:
        """The refusal of a merge into `table`, naming why (`merge_refusal`) and the alternative."""
        return UnsupportedConnectionError(
            f"MergeOperator cannot write {table!r} on {self.dialect}: {self.merge_refusal}. Use "
            "PartitionOverwriteOperator (same sql, partition_column and window), which replaces the "
            "window's partitions whole and is as safe to rerun."
        )

    def lookback_refused(self, table: str, lookback: int) -> UnsupportedConnectionError:
        """The refusal of a write with lookback to `table`, naming why (`lookback_refusal`) and the
        alternative (an engine whose table formats differ refuses by format, when it sees it)."""
        return UnsupportedConnectionError(
            f"lookback={lookback} cannot be honoured for {table!r} on {self.dialect}: "
            f"{self.lookback_refusal}. Use lookback=0 and rerun the earlier windows that received "
            "late rows (a backfill of those days), each its own write."
        )

    # ------------------------------------------------------------------ identifiers
    def table(self, name: str, alias: str | None = None) -> exp.Table:
        """A quoted table expression from a validated `table`, `schema.table` or (Spark)
        `catalog.schema.table`."""
        catalog, schema, table = table_parts(name)
        return exp.Table(
            this=exp.to_identifier(table, quoted=True),
            db=exp.to_identifier(schema, quoted=True) if schema else None,
            catalog=exp.to_identifier(catalog, quoted=True) if catalog else None,
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
    def render(self, expression: exp.Expr | str, copy: bool = True) -> str:
        """Render in this dialect, keeping `:name` placeholders for SQLAlchemy to bind.

        The dialect's generator writes the placeholders itself (`binding_dialect`), so rendering
        does not walk the tree first: it ran for every statement of every write. `copy=False`
        only for a tree nobody else holds: the generator preprocesses it in place. A string is a
        statement this adapter rendered already (`window_checksum_sql`), returned as it is.
        """
        if isinstance(expression, str):
            return expression
        return expression.sql(dialect=binding_dialect(self.dialect), copy=copy)

    def render_text(self, sql: str) -> str:
        """`render` of `sql` as the determinism lint parses it in this dialect (`write_spec`'s
        query), once per adapter class and text in a process: the fingerprint's "sql" rendered
        the task's SQL on every write (~0.5 ms of CPU), though it is a function of the text."""
        return rendered_once(
            (type(self), "sql", sql), lambda: self.render(parsed_statement(sql, self.dialect), copy=False)
        )

    def execute(self, conn: Connection, expression: exp.Expr | str, params: Mapping[str, Any]) -> Any:
        """Run one statement built by this adapter with bound parameters; SQLAlchemy's result.

        The builders below make a tree per statement (the user's query copied once, by `source`),
        so it renders without the generator's copy, which was a third of the render's time.
        """
        return conn.execute(sa.text(self.render(expression, copy=False)), dict(params))

    # ------------------------------------------------------------------ connections
    @classmethod
    def connect_args(cls, timeout: float) -> dict[str, Any]:
        """DB-API connect arguments bounding every wait (connect, one statement) by `timeout` seconds."""
        return {}

    @classmethod
    @contextmanager
    def bounded_lock_wait(cls, conn: Connection | Session, timeout: float) -> Iterator[None]:
        """Inside it, a statement waits at most `timeout` seconds for a row lock (then raises).

        A class method: it runs on connections that are not ours (Airflow's metadata database),
        whose engines an adapter instance must not configure.
        """
        yield

    def database_path(self) -> Path:
        """The database file of an embedded database (where its lock files live)."""
        database = self.engine.url.database
        if not database or database == ":memory:":
            raise UnsupportedConnectionError(
                f"the {self.dialect} connection has no database file: set the connection's host to an "
                f'absolute file path, e.g. {{"conn_type": "{self.dialect}", "host": "/data/warehouse.db"}}.'
            )
        return Path(database)

    def lock_path(self, lock: LockId) -> Path:
        """The lock file of `lock`, in a directory beside the database file."""
        path = self.database_path()
        return path.with_name(path.name + ".locks") / f"{lock.name}.lock"

    @contextmanager
    def locked_transaction(
        self,
        table: str,
        window: Window | Sequence[Window],
        timeout: float,
        connection: Connection | None = None,
    ) -> Iterator[Connection]:
        """One transaction holding the (table, window) lock: commit on success, roll back on error.

        Two attempts on one window (a zombie and its retry, a scheduled run and a backfill) never
        interleave; the loser waits at most `timeout` seconds, then raises LockTimeoutError. How
        the lock is taken is the adapter's `lock_style`. A write over several periods (lookback)
        passes them oldest first and holds each period's lock, so it also excludes a write of any
        one of them. `connection`: an open one to run on instead of a new one, outside a
        transaction (an advisory lock's continues a READ COMMITTED read one, `history.link`);
        closed at the end as one opened here, or unused where the lock is a file's, taken before
        the transaction's connection opens.
        """
        if connection is not None and self.lock_style not in ("advisory", "get_lock"):
            connection.close()
            connection = None
        lent = connection
        connect = self.connect if lent is None else (lambda: lent)
        windows = [window] if isinstance(window, Window) else list(window)
        held = [LockId.of(self.lock_resource(table, w)) for w in windows]
        named = windows[0] if len(windows) == 1 else spanning(windows)

        def timed_out(how: str) -> Callable[[], Exception]:
            return lambda: locks.lock_timeout_error(table, named.label(), timeout, how)

        transaction: contextlib.AbstractContextManager[Connection]
        if self.lock_style == "advisory":
            transaction = locks.advisory_transaction(connect, held, timeout, timed_out("advisory lock held"))
        elif self.lock_style == "get_lock":
            how = f"GET_LOCK {', '.join(lock.name for lock in held)} not granted"
            transaction = locks.get_lock_transaction(connect, held, timeout, timed_out(how))
        else:
            paths = [self.lock_path(lock) for lock in held]
            shown = ", ".join(str(p) for p in paths)
            held_by = timed_out(f"lock file {shown} held")
            transaction = locks.file_transaction(self.engine, paths, timeout, held_by, self.late_release())
        with transaction as conn:
            yield conn

    def lock_resource(self, table: str, window: Window) -> str:
        """What the (table, window) lock is named after. Advisory locks and lock files belong to
        one database already; named locks (`get_lock`) are server-wide, so their name carries the
        database the table lives in: two databases' tables of one name never wait for each other."""
        name = table.lower()
        if self.lock_style == "get_lock" and "." not in name:
            name = f"{(self.engine.url.database or '').lower()}.{name}"
        return f"{name}|{window.label()}"

    @contextmanager
    def session_lock(self, resource: str, wait: float, prefix: str = "idem_") -> Iterator[None]:
        """Hold a lock on `resource` across transactions, waiting at most `wait` seconds for it.

        On a connection of its own (or a lock file), so it outlives the transactions inside the
        block; the database or the kernel drops it when the process dies, so a lock that is free
        means its last holder is gone. Raises LockTimeoutError after `wait` seconds.
        """
        lock = LockId.of(resource, prefix)
        held: contextlib.AbstractContextManager[None]
        if self.lock_style == "advisory":
            held = locks.advisory_session_lock(self.engine, lock, wait)
        elif self.lock_style == "get_lock":
            held = locks.get_lock_session_lock(self.engine, lock, wait)
        else:
            path = self.lock_path(lock)
            held = locks.file_lock(
                path, wait, lambda: LockTimeoutError(f"lock file {path} held for {wait:g} s")
            )
        with held:
            yield

    def insert_if_absent(self, conn: Connection, table: sa.Table, values: Mapping[str, Any]) -> int:
        """INSERT one row unless a row with the same unique key exists (`upsert_style` spells it);
        the row count: 1 inserted, 0 a row with that key was there (or is being inserted by a
        transaction that then commits: the statement waits for it on every server).

        For records with natural keys (one redelivered from the spool is stored once) and for rows
        whose key decides who came first (a fence, an effect's claim). Values are bound with the
        table's column types, so their type decorators (UTC timestamps) apply. The statement is
        built and rendered once per dialect, table and columns (`insert_if_absent_statement`).
        """
        statement = insert_if_absent_statement(self.dialect, self.upsert_style, table, tuple(values))
        return rowcount(conn.execute(statement, dict(values)))

    def is_deadlock(self, err: BaseException) -> bool:
        """Whether `err` is the database choosing this transaction as a deadlock's victim: it was
        rolled back whole, so running it again is safe."""
        return False

    # ------------------------------------------------------------------ introspection
    def describe(self, conn: Connection, table: str) -> TableInfo:
        """Reflect the target's columns and unique keys; an unknown table is a SchemaError."""
        schema, name = split_table_name(table)
        inspector = sa.inspect(conn)
        if not inspector.has_table(name, schema=schema):
            raise missing_table(table)
        columns: dict[str, ColumnInfo] = {}
        for col in inspector.get_columns(name, schema=schema):
            columns[col["name"].lower()] = ColumnInfo(
                name=col["name"],
                type_name=str(col["type"]),
                kind=self.column_kind(col["type"]),
                nullable=bool(col.get("nullable", True)),
                autoincrement=col.get("autoincrement") is True,
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

    def has_unique_key(self, conn: Connection, info: TableInfo, keys: Sequence[str]) -> bool:
        """Whether a primary key or unique index covers exactly `keys`: what an upsert needs to
        find a row, and what makes the target's keys unique without a check."""
        return frozenset(k.lower() for k in keys) in info.unique_keys

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
    # Each builder makes a fresh tree (the user's query copied once, by `source`), so the chained
    # sqlglot calls take copy=False: copying the growing tree at every step was half the time of
    # building and rendering a write's statements.
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

    def produced_columns(self, conn: Connection, query: exp.Expr, params: Mapping[str, Any]) -> list[str]:
        """The names of the SELECT's result columns.

        Read from the parsed query when every projection is a plain column or has an alias, whose
        name every engine gives it; otherwise (`*`, an unaliased expression, whose name is the
        engine's choice) the database answers a probe that returns no rows. The probe was a
        statement, and a render of the user's query, of every write.
        """
        select = query
        while isinstance(select, exp.SetOperation):
            select = select.this
        if isinstance(select, exp.Select) and all(
            isinstance(p, exp.Alias | exp.Column) and not p.is_star and p.output_name
            for p in select.expressions
        ):
            return [p.output_name for p in select.expressions]
        result = self.execute(conn, self.probe_columns(query), params)
        produced = list(result.keys())
        result.close()
        return produced

    def probe_columns(self, query: exp.Expr) -> exp.Select:
        """A query returning no rows whose result columns are the user's SELECT's columns."""
        return (
            exp.select("*")
            .from_(self.source(query), copy=False)
            .where(exp.false(), copy=False)
            .limit(0, copy=False)
        )

    def delete_window(self, table: str, partition_column: str) -> exp.Delete:
        return exp.delete(self.table(table), where=self.in_window(partition_column))

    def count_window(self, table: str, partition_column: str) -> exp.Select:
        return (
            exp.select(exp.Count(this=exp.Star()))
            .from_(self.table(table), copy=False)
            .where(self.in_window(partition_column), copy=False)
        )

    def insert_select(
        self, table: str, columns: Sequence[str], query: exp.Expr, partition: ColumnInfo | None = None
    ) -> exp.Insert:
        """INSERT INTO table (cols) SELECT cols FROM (query): set-based, rows never leave the database;
        given the `partition` column, a row outside the window fails it where the flag says the
        database refuses the cast (`refuses_rows_outside_in_statement`, `refuse_outside`)."""
        guard = partition if self.refuses_rows_outside_in_statement else None
        projections = [
            self.refuse_outside(c, guard.kind)
            if guard and c.lower() == guard.name.lower()
            else self.column(c, SOURCE_ALIAS)
            for c in columns
        ]
        select = exp.select(*projections).from_(self.source(query), copy=False)
        if self.upsert_select_needs_where:
            select = select.where(exp.true(), copy=False)
        return exp.insert(
            select,
            self.table(table),
            columns=[exp.to_identifier(c, quoted=True) for c in columns],
            copy=False,
        )

    def upsert(
        self,
        table: str,
        columns: Sequence[str],
        keys: Sequence[str],
        query: exp.Expr,
        partition: ColumnInfo | None = None,
        info: TableInfo | None = None,
    ) -> exp.Expr:
        """Insert new keys, update existing ones, in the database's native upsert (`partition`: see
        `insert_select`; `info`, the target's columns, read where the guard depends on them: MariaDB)."""
        insert = self.insert_select(table, columns, query, partition)
        updates = [c for c in columns if c.lower() not in {k.lower() for k in keys}] or list(keys)
        insert.set("conflict", self.on_conflict(table, keys, updates, partition, info))
        return insert

    def on_conflict(
        self,
        table: str,
        keys: Sequence[str],
        updates: Sequence[str],
        partition: ColumnInfo | None = None,
        info: TableInfo | None = None,
    ) -> exp.OnConflict:
        """The upsert's conflict clause in the adapter's `upsert_style`.

        `ON CONFLICT (keys) DO UPDATE SET c = excluded.c`, or MariaDB's
        `ON DUPLICATE KEY UPDATE c = VALUES(c)` (which finds the key from the table's unique indexes).
        Given the `partition` column, its SET refuses to move a row from outside the window
        (`stay_in_window`).
        """
        _, name = split_table_name(table)
        duplicate = self.upsert_style == "on_duplicate_key"

        def new_value(c: str) -> exp.Expr:
            if duplicate:
                return exp.Anonymous(this="VALUES", expressions=[self.column(c)])
            return self.column(c, "excluded")

        in_statement = partition is not None and self.refuses_moves_in_statement
        sets: list[exp.Expr] = []
        for c in updates:
            value = new_value(c)
            if in_statement and partition is not None and c.lower() == partition.name.lower():
                value = self.stay_in_window(name, partition.name, partition.kind, value)
            sets.append(exp.EQ(this=self.column(c), expression=value))
        if duplicate:
            return exp.OnConflict(duplicate=True, action=exp.var("UPDATE"), expressions=sets)
        return exp.OnConflict(
            conflict_keys=[exp.to_identifier(k, quoted=True) for k in keys],
            action=exp.var("DO UPDATE"),
            expressions=sets,
            where=None
            if partition is None or in_statement
            else exp.Where(this=self.in_window(partition.name, name)),
        )

    def delete_missing(
        self, table: str, partition_column: str, keys: Sequence[str], query: exp.Expr
    ) -> exp.Delete:
        """Delete the window's rows whose key the source no longer has (merge with delete_missing)."""
        _, name = split_table_name(table)
        match = exp.and_(
            *[exp.EQ(this=self.column(k, SOURCE_ALIAS), expression=self.column(k, name)) for k in keys]
        )
        exists = exp.Exists(
            this=exp.select(exp.Literal.number(1))
            .from_(self.source(query), copy=False)
            .where(match, copy=False)
        )
        return exp.delete(
            self.table(table),
            where=exp.and_(self.in_window(partition_column, name), exp.not_(exists)),
        )

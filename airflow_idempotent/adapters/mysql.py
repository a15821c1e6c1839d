"""MariaDB / MySQL: ON DUPLICATE KEY UPDATE upserts, GET_LOCK named locks, InnoDB lock waits."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlglot import exp

from airflow_idempotent.adapters.base import ColumnInfo, EngineAdapter
from airflow_idempotent.adapters.identifiers import split_table_name
from airflow_idempotent.adapters.schema import TableInfo

#: Integer column types (as SQLAlchemy's reflection names them, with a display width or UNSIGNED):
#: the cheapest value for MariaDB to write back, so the upsert's guard is set on such a key column.
INTEGER_TYPE = re.compile(r"^(TINY|SMALL|MEDIUM|BIG)?INT(EGER)?\b", re.IGNORECASE)
#: The SELECT clauses under which an ON DUPLICATE KEY UPDATE may not refer to other tables'
#: columns, or which change what one row of the SELECT is: the SELECT stays a derived table.
WRAPPED_CLAUSES = ("with_", "group", "having", "distinct")


class MySQLAdapter(EngineAdapter):
    dialect = "mysql"
    upsert_style = "on_duplicate_key"
    lock_style = "get_lock"
    transactional_ddl = False
    drop_temporary_keyword = True
    update_join_style = "join"
    checksum_version = "v2"
    #: InnoDB's "Deadlock found when trying to get lock" (ER_LOCK_DEADLOCK).
    DEADLOCK_ERRNO = 1213

    def is_deadlock(self, err: BaseException) -> bool:
        args: tuple[Any, ...] = tuple(getattr(getattr(err, "orig", None), "args", None) or ())
        return bool(args) and args[0] == self.DEADLOCK_ERRNO

    def failing_value(self, value: exp.Expr, kind: str) -> exp.Expr:
        """A scalar subquery of two rows: "Subquery returns more than 1 row" (1242) in every SQL
        mode, evaluated only in the branch that reaches it (a failed cast is a warning here)."""
        two_rows = exp.union(
            exp.select(exp.Literal.number(1)), exp.select(exp.Literal.number(2)), distinct=False
        )
        return exp.Subquery(this=two_rows)

    def null_safe_distinct(self, left: exp.Expr, right: exp.Expr) -> exp.Expr:
        """`NOT (a <=> b)`: MariaDB's NULL-safe equality, negated (it has no IS DISTINCT FROM)."""
        return exp.not_(exp.paren(exp.NullSafeEQ(this=left, expression=right)))

    def row_hash(self, text: exp.Expr) -> exp.Expr:
        """The first 60 bits of MD5 as an unsigned integer (MariaDB has no 64-bit text hash)."""
        prefix = exp.Substring(
            this=exp.MD5(this=text), start=exp.Literal.number(1), length=exp.Literal.number(15)
        )
        conv = exp.Anonymous(
            this="CONV", expressions=[prefix, exp.Literal.number(16), exp.Literal.number(10)]
        )
        return exp.cast(conv, exp.DataType.build("DECIMAL(20, 0)"))  # CONV returns text: SUM would be a float

    def row_checksum(self, columns: Sequence[ColumnInfo]) -> exp.Expr:
        """v2: CRC32 of the row's text form (MariaDB has no typed hash; 2.7x cheaper than MD5).

        32 bits per row: a changed window goes unnoticed with odds of about 1 in 4 billion.
        COALESCE with a text literal converts each value to text itself (no CAST per column); a
        NOT NULL column skips it, since it would return the value's own text: the checksum is the
        same v2 and 7% cheaper on the bench's table. Measured at 1,000,000 rows, per-column CRC32
        or arithmetic on the numbers cost more than the one CRC32 (docs/checksum.md).
        """
        parts = [
            exp.func("COALESCE", self.column(c.name), exp.Literal.string("<null>"))
            if c.nullable
            else self.column(c.name)
            for c in columns
        ]
        text = exp.Anonymous(this="CONCAT_WS", expressions=[exp.Literal.string("|"), *parts])
        return exp.Anonymous(this="CRC32", expressions=[text])

    def insert_select(
        self, table: str, columns: Sequence[str], query: exp.Expr, partition: ColumnInfo | None = None
    ) -> exp.Insert:
        """`INSERT INTO t (cols) <the SELECT>`, without the derived table around it where the SELECT
        is one plain SELECT that does not read `table`: MariaDB spent ~2% more CPU on an upsert of
        100,000 rows through the derived table (server CPU 275.8 against 271.3 ms, medians of 7).
        The columns are the SELECT's own, in its order (`strategies.prepare`), so by position they
        are the same; a SELECT reading the target keeps the derived table, so that the upsert's
        `table.column` references name the target alone."""
        guarded = partition is not None and self.refuses_rows_outside_in_statement
        if guarded or not self.plain_select(table, query):  # the base wraps the SELECT to guard it
            return super().insert_select(table, columns, query, partition)
        return exp.insert(
            query.copy(),
            self.table(table),
            columns=[exp.to_identifier(c, quoted=True) for c in columns],
            copy=False,
        )

    def plain_select(self, table: str, query: exp.Expr) -> bool:
        """Whether `query` is one SELECT without WITH, GROUP BY, HAVING or DISTINCT, reading no
        table named like `table`'s (any schema, any case)."""
        if not isinstance(query, exp.Select) or any(query.args.get(k) for k in WRAPPED_CLAUSES):
            return False
        _, name = split_table_name(table)
        return all(t.name.lower() != name.lower() for t in query.find_all(exp.Table))

    def counts_updates(self, info: TableInfo, keys: Sequence[str], partition: ColumnInfo | None) -> bool:
        """The upsert's guard counts the rows it updates in LAST_INSERT_ID (`upsert`), where it
        guards the partition column (not a key column) and no AUTO_INCREMENT column would set
        LAST_INSERT_ID itself. Server CPU at 100,000 rows: +0.7 ms, against 12 ms for the window count
        it replaces (a user variable as the counter cost 13 ms)."""
        if partition is None or partition.name.lower() in {k.lower() for k in keys}:
            return False
        return not any(c.autoincrement for c in info.columns.values())

    def reset_update_count(self, conn: Connection) -> None:
        zero = exp.Anonymous(this="LAST_INSERT_ID", expressions=[exp.Literal.number(0)])
        self.execute(conn, exp.select(zero), {}).close()

    def updates_counted(self, result: Any) -> int:
        """The counter's last value, which MariaDB returns as the statement's insert id (DB-API's
        `lastrowid`); 0 when no row was updated (the counter never ran, and no AUTO_INCREMENT)."""
        return int(result.lastrowid or 0)

    def on_conflict(
        self,
        table: str,
        keys: Sequence[str],
        updates: Sequence[str],
        partition: ColumnInfo | None = None,
        info: TableInfo | None = None,
    ) -> exp.OnConflict:
        """`ON DUPLICATE KEY UPDATE`, its guard (`stay_in_window`) set on an integer key column where
        there is one, and counting the updated rows where `counts_updates` says so.

        The guard `key = CASE WHEN <held row in the window> THEN <held key> ELSE <failure> END` comes
        first in the SET list, so it reads the held partition value before `partition =
        VALUES(partition)` replaces it (MariaDB evaluates the assignments left to right), and writes
        the key back unchanged. Server CPU at 100,000 rows, medians of 7: hand-written upsert 262.6 ms,
        the guard on the DATE column 282.1, on the BIGINT key 270.0: writing back an expression's
        value costs MariaDB per type, a DATE's conversion more than an integer's. The counter
        `LAST_INSERT_ID(LAST_INSERT_ID() + 1)` runs once per updated row, in the guard's condition.
        """
        if partition is None or info is None or not self.counts_updates(info, keys, partition):
            return super().on_conflict(table, keys, updates, partition, info)
        _, name = split_table_name(table)
        carrier = next((k for k in keys if INTEGER_TYPE.match(info.column(k, "key column").type_name)), None)
        counter = exp.Anonymous(
            this="LAST_INSERT_ID",
            expressions=[
                exp.Add(this=exp.Anonymous(this="LAST_INSERT_ID"), expression=exp.Literal.number(1))
            ],
        )
        condition = exp.and_(self.in_window(partition.name, name), counter)
        held_at = self.column(partition.name, name)

        def values(c: str) -> exp.Expr:
            return exp.Anonymous(this="VALUES", expressions=[self.column(c)])

        def guard(kept: exp.Expr) -> exp.Expr:
            return exp.Case(
                ifs=[exp.If(this=condition, true=kept)],
                default=self.failing_value(held_at.copy(), partition.kind),
            )

        sets: list[exp.Expr] = []
        if carrier is not None:
            sets.append(exp.EQ(this=self.column(carrier), expression=guard(self.column(carrier, name))))
        for c in updates:
            is_partition = carrier is None and c.lower() == partition.name.lower()
            sets.append(
                exp.EQ(this=self.column(c), expression=guard(values(c)) if is_partition else values(c))
            )
        return exp.OnConflict(duplicate=True, action=exp.var("UPDATE"), expressions=sets)

    def source_unique_keys(self, conn: Connection, table: str) -> list[frozenset[str]]:
        """The unique NOT NULL keys from SHOW INDEX, one statement that resolves the name as a query
        does (a temporary table first); SQLAlchemy's reflection takes two and parses SHOW CREATE TABLE."""
        split_table_name(table)  # a catalog part is refused, as for every SQL target
        target = self.render(self.table(table))
        keys: dict[str, set[str]] = {}
        nullable: set[str] = set()
        for row in conn.execute(sa.text(f"SHOW INDEX FROM {target}")).mappings():
            if int(row["Non_unique"]) == 0:
                keys.setdefault(row["Key_name"], set()).add(str(row["Column_name"]).lower())
                if row["Null"] == "YES":
                    nullable.add(row["Key_name"])
        return [frozenset(cols) for key, cols in keys.items() if key not in nullable]

    @classmethod
    def connect_args(cls, timeout: float) -> dict[str, Any]:
        """PyMySQL's connect, read and write timeouts (whole seconds)."""
        seconds = max(1, int(timeout))
        return {"connect_timeout": seconds, "read_timeout": seconds, "write_timeout": seconds}

    @classmethod
    @contextmanager
    def bounded_lock_wait(cls, conn: Connection | Session, timeout: float) -> Iterator[None]:
        """innodb_lock_wait_timeout for this session (whole seconds), back to the default after."""
        conn.execute(
            sa.text("SET SESSION innodb_lock_wait_timeout = :seconds"), {"seconds": max(1, int(timeout))}
        )
        try:
            yield
        finally:
            conn.execute(sa.text("SET SESSION innodb_lock_wait_timeout = DEFAULT"))

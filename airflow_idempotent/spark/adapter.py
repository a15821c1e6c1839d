"""Apache Spark through Spark Connect: the SQL runs in the cluster, no row passes through the worker.

Reached with an Airflow `spark_connect` connection (the apache-spark provider's type: host, port
15002 by default, login = user id, password = token, extra `use_ssl`), turned into an `sc://` URL
by the provider's `SparkConnectHook` and opened with pyspark's `SparkSession.builder.remote()`.

What the engine cannot do is declared in flags the base and the strategies read:
- no multi-statement transactions (`supports_transactions = False`): the writes go by the target's
  table format (`airflow_idempotent.spark.writes`): a Delta table commits the window itself (one
  REPLACE WHERE or MERGE INTO commit, `airflow_idempotent.spark.delta`); a parquet table gets the
  crash-safe partition switch of `airflow_idempotent.spark.switch`, not DELETE + INSERT;
- no MERGE/DELETE/UPDATE on the parquet tables of Spark's catalog: a MergeOperator on one is
  refused once the catalog names its format, before anything is written (`merge_refusal`);
- no lock of its own (`has_native_lock = False`): the (table, window) lock is held in the
  history store.

To keep one interface with the SQLAlchemy adapters, a small `SparkEngine` stands in for an
engine: `connect()` yields a `SparkConnection`, whose results answer `keys()`, `one()`, `all()`,
`scalar_one()` as SQLAlchemy's do. Values are bound as Spark's named parameters
(`spark.sql(query, args={...})`), which are written `:name` like SQLAlchemy's.
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, ClassVar

from sqlglot import exp

from airflow_idempotent.adapters.base import SOURCE_ALIAS, ColumnInfo, ColumnKind, TableInfo
from airflow_idempotent.adapters.identifiers import table_parts, validate_identifier
from airflow_idempotent.errors import SchemaError, UnsupportedConnectionError
from airflow_idempotent.spark.catalog_sql import CatalogStatements

log = logging.getLogger(__name__)

#: The connection type of the apache-spark provider's Spark Connect connection.
CONN_TYPE = "spark_connect"
#: Prefix of the per-attempt staging tables (and of their directories, hidden from Spark's listing).
STAGING_PREFIX = "_idem_stg_"
#: Prefix of the throw-away managed tables whose DROP deletes replaced partition directories.
TRASH_PREFIX = "_idem_trash_"
ATTEMPTS_DIR = "_idem_attempts"
#: The directory name a partitioned parquet write gives a NULL partition value.
NULL_DIRECTORY = "__HIVE_DEFAULT_PARTITION__"
#: Columns per BIGINT of the checksum's NULL mask (`SparkAdapter.row_checksum`): bits 0-61.
NULL_MASK_BITS = 62
#: The row hashes' sum is taken in slices of this many bits, each summed as a BIGINT (`hash_total`).
HASH_SLICE_BITS = 21
HASH_SLICE = 1 << HASH_SLICE_BITS
#: The error condition of a name the catalog does not hold.
TABLE_NOT_FOUND = "TABLE_OR_VIEW_NOT_FOUND"
#: The schema field metadata that keeps a CHAR(n) / VARCHAR(n) column's type (Spark lists it as a string).
CHAR_VARCHAR_KEY = "__CHAR_VARCHAR_TYPE_STRING"
#: Delta's check that REPLACE WHERE's rows match its predicate (on by default; forced on here).
CONSTRAINT_CHECK = "spark.databricks.delta.replaceWhere.constraintCheck.enabled"
#: What every session the provider opens is set to, once (`open_session`): a write relies on it
#: instead of setting it, a round trip each, and no write leaves the session changed.
SESSION_CONF = {CONSTRAINT_CHECK: "true"}
#: A CHAR(n) column's type as DESCRIBE shows it.
CHAR_TYPE = re.compile(r"char\((\d+)\)")
#: The staged rows' refusal of a value longer than its CHAR(n) column (`typed_rows`).
CHAR_TOO_LONG = "a value is longer than its CHAR column allows"


def raise_error(text: str) -> exp.Expr:
    """``raise_error('<text>')``: a row reaching it fails the statement in the cluster, before any
    commit; the caller finds `text` in the failure and names the rows."""
    return exp.Anonymous(this="raise_error", expressions=[exp.Literal.string(text)])


def spark_literal(value: Any) -> exp.Expr:
    """`value` as a typed Spark SQL literal (sqlglot escapes strings): what a bound parameter would be."""
    if value is None:
        return exp.null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, Decimal)):
        return exp.Literal.number(str(value))
    if isinstance(value, float):
        return exp.Literal.number(repr(value))
    if isinstance(value, datetime):
        kind = "TIMESTAMP" if value.tzinfo is not None else "TIMESTAMP_NTZ"
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), kind, dialect="spark")
    if isinstance(value, date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, str):
        return exp.Literal.string(value)
    raise SchemaError(
        f"parameter value {value!r} of type {type(value).__name__} cannot be passed to Spark: use a "
        "string, number, date, timestamp, boolean or None."
    )


def inline_params(query: str, params: Mapping[str, Any]) -> str:
    """`query` with each `:name` of `params` replaced by its value as a literal (`spark_literal`)."""
    import sqlglot

    literals = {name: spark_literal(value) for name, value in params.items()}

    def bind(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and node.name in literals:
            return literals[node.name].copy()
        return node

    tree = sqlglot.parse_one(query, read="spark")
    return tree.transform(bind).sql(dialect="spark")


class SparkResult:
    """A Spark DataFrame answering like a SQLAlchemy result (only aggregates are ever collected)."""

    def __init__(self, frame: Any) -> None:
        self.frame = frame
        self.rowcount = -1

    def keys(self) -> list[str]:
        return list(self.frame.columns)  # analysis only: nothing runs

    def all(self) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.frame.collect()]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.all())

    def one(self) -> tuple[Any, ...]:
        rows = self.all()
        if len(rows) != 1:
            raise SchemaError(f"expected one row from Spark, got {len(rows)}")
        return rows[0]

    def first(self) -> tuple[Any, ...] | None:
        rows = self.frame.limit(1).collect()
        return tuple(rows[0]) if rows else None

    def scalar_one(self) -> Any:
        return self.one()[0]

    def close(self) -> None:
        """Nothing to release: a DataFrame holds no cursor."""


@dataclass
class SparkConnection:
    """One Spark Connect session (a server-side session id), as the adapter's statements see it."""

    session: Any
    session_id: str
    #: the Connect URL of its server, without the session: what the provider learnt of a server
    #: is kept under it for the process (`CatalogStatements.set_locations`); "" keeps nothing
    server: str = ""

    def sql(self, query: str, params: Mapping[str, Any] | None = None) -> SparkResult:
        """Run (commands) or plan (queries) one statement, its `:name` parameters as literals.

        Spark 4.1 binds parameters in its parser, and a session extension's parser that wraps it
        (Delta's, Iceberg's) drops them, so `spark.sql(q, args)` fails with UNBOUND_SQL_PARAMETER
        there (delta-io/delta#7640; the legacy analyzer binding rescues commands, not queries). The
        values are therefore written into the statement by sqlglot (`inline_params`), typed and
        escaped, never formatted as text; a statement without parameters is sent as it is."""
        text = inline_params(query, params) if params else query
        return SparkResult(self.session.sql(text))


def open_session(url: str) -> Any:
    """A Spark Connect session on `url`, its executions not reattachable, set to `SESSION_CONF`
    (a conf Spark does not know, e.g. Delta's on a server without Delta, is only stored).

    pyspark 4.1's client (the line Delta 4.4 and Iceberg 1.11 run on) can deadlock a process: a
    reattachable execution starts its release pool's thread while holding the pool's class lock,
    and if the garbage collector runs in that new thread and finalizes a session (`__del__` closes
    its client, which takes the same lock), neither thread moves again, and no signal handler
    runs. It stopped this suite's Spark group for an hour in CI. pyspark fixed it in 4.2
    (SPARK-55406, SPARK-55020); tests/spark/test_spark_client.py reproduces it with 4.1. Without
    reattachable executions no thread is started under that lock. What they would add, resuming
    a result stream after a dropped connection, these statements do not need: a write that loses
    its connection fails, and its rerun is safe by design."""
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(url).create()
    session.client.disable_reattachable_execute()
    for key, value in SESSION_CONF.items():
        session.conf.set(key, value)
    return session


class SparkEngine:
    """Stands in for a SQLAlchemy engine: the Connect URL and sessions on it, opened lazily."""

    def __init__(self, url: str, conn_id: str | None = None) -> None:
        self.url = url
        self.conn_id = conn_id

    def session_url(self, session_id: str) -> str:
        """The URL with `session_id` added: sc://host:port/;param=value;session_id=<uuid>."""
        base = self.url.rstrip(";")
        if "/;" in base:
            return f"{base};session_id={session_id}"
        return f"{base.rstrip('/')}/;session_id={session_id}"

    @contextlib.contextmanager
    def connect(self, session_id: str | None = None) -> Iterator[SparkConnection]:
        """A Spark Connect session of its own (`session_id` attaches to a known one)."""
        sid = session_id or str(uuid.uuid4())
        session = open_session(self.session_url(sid))
        try:
            yield SparkConnection(session, sid, self.url)
        finally:
            with contextlib.suppress(Exception):
                session.stop()

    def dispose(self) -> None:
        """Nothing pooled."""


@dataclass(frozen=True)
class SparkTableInfo(TableInfo):
    """A catalog table: its columns' Spark types, partition columns, location and format."""

    partition_columns: tuple[str, ...] = ()
    location: str = ""
    provider: str = ""
    spark_types: Mapping[str, str] | None = None  # lower-case name -> Spark type, e.g. decimal(12,2)
    #: lower-case name -> n of each CHAR(n) column (the catalog lists them as strings)
    char_lengths: Mapping[str, int] | None = None
    #: each partition field as DESCRIBE shows it: a column (identity) or a transform, e.g.
    #: ``months(sale_date)``, ``bucket(4, id)``
    partitioning: tuple[str, ...] = ()
    #: a CHAR(n) column, which Spark pads when it reads (``spark.sql.readSideCharPadding``), not
    #: when it writes: its rows hash differently as written and as read back (`observed`)
    padded_chars: bool = False


def partition_fields(rows: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The partition fields in DESCRIBE TABLE EXTENDED's rows: a table partitioned by columns only
    lists them under ``# Partition Information`` (after a ``# col_name`` header), one with a
    transform lists every field as ``Part <n>`` under ``# Partitioning``."""
    fields: list[str] = []
    section = ""
    for key, value in rows:
        if key == "# col_name":  # the header of the section's columns
            continue
        if key.startswith("#"):
            section = key if key in ("# Partition Information", "# Partitioning") else ""
            continue
        if not key:
            section = ""
        elif section == "# Partitioning" and key.startswith("Part "):
            fields.append(value.strip())
        elif section == "# Partition Information":
            fields.append(key)
    return tuple(fields)


class SparkAdapter(CatalogStatements):
    """Spark SQL over Spark Connect: partitioned parquet tables in the session's catalog."""

    dialect = "spark"
    checksum_version = "v2"
    # no upsert_style and no lock_style: Spark has neither an upsert nor a lock to offer
    supports_transactions: ClassVar[bool] = False
    # merge by table format: Delta tables merge, parquet tables are refused (`spark.writes.merge`)
    supports_merge: ClassVar[bool] = True
    has_native_lock: ClassVar[bool] = False
    hosts_history_store: ClassVar[bool] = False
    merge_refusal: ClassVar[str] = (
        "it is a parquet table, on which Spark refuses MERGE INTO, DELETE and UPDATE (a Delta Lake "
        "table takes them: CREATE TABLE .. USING delta), so a merge cannot be done safely"
    )
    # lookback by table format: Delta and Iceberg tables take it, parquet tables are refused when
    # the write sees the format (`spark.writes`, `spark.guard`), before anything is written
    lookback_refusal: ClassVar[str] = (
        "it is a parquet table, whose partition switch verifies and records one window per write "
        "(a Delta Lake or Iceberg table takes lookback: one commit covers every period)"
    )

    engine: SparkEngine  # type: ignore[assignment]  # not SQLAlchemy: a Spark Connect endpoint

    def __init__(self, engine: SparkEngine) -> None:  # type: ignore[override]
        self.engine = engine

    @classmethod
    def from_connection(cls, conn_id: str) -> SparkAdapter:
        """The adapter of an Airflow `spark_connect` connection (URL built by SparkConnectHook)."""
        try:
            from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
        except ImportError as err:  # pragma: no cover - depends on the install
            raise UnsupportedConnectionError(
                f"connection {conn_id!r} is a spark_connect connection, which needs the spark extra: "
                "pip install 'airflow-idempotent[spark]'"
            ) from err
        return cls(SparkEngine(SparkConnectHook(conn_id).get_connection_url(), conn_id))

    # ------------------------------------------------------------------ statements
    def execute(self, conn: Any, expression: exp.Expr | str, params: Mapping[str, Any]) -> Any:
        return conn.sql(self.render(expression), self.bindable(params))

    def bindable(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Parameters as Spark Connect binds them (dates, numbers, strings, decimals)."""
        return {k: v for k, v in params.items()}

    @staticmethod
    def ident(name: str) -> str:
        """A validated, back-quoted Spark identifier."""
        return exp.to_identifier(validate_identifier(name), quoted=True).sql(dialect="spark")

    def qualified(self, table: str) -> str:
        return self.table(table).sql(dialect="spark")

    @staticmethod
    def literal(value: str) -> str:
        """A string literal, escaped by sqlglot (partition values, locations)."""
        return exp.Literal.string(value).sql(dialect="spark")

    # ------------------------------------------------------------------ introspection
    def describe(self, conn: Any, table: str) -> SparkTableInfo:
        """The table as the catalog holds it, in two round trips that run no job: the schema
        (names, types, nullability, CHAR metadata: an analysis of ``spark.table``) and ``DESCRIBE
        TABLE EXTENDED`` (partition fields, location, provider, CHAR(n) as the catalog spells it).
        ``catalog.listColumns`` said the same as the schema but runs a command, 35-110 ms more
        per write, and refuses a table partitioned by a transform (Iceberg's ``months(d)``)."""
        catalog, schema, name = table_parts(table)
        if catalog:  # a table of another catalog (an Iceberg catalog: `ice.db.t`)
            schema = f"{catalog}.{schema}"
        qualified = self.qualified(table)
        try:  # a missing table is the analysis's error, not a question asked first
            fields = conn.session.table(qualified).schema.fields
        except Exception as err:
            if TABLE_NOT_FOUND in str(err):
                raise SchemaError(
                    f"table {table!r} does not exist in the Spark catalog: create it first (e.g. CREATE "
                    f"TABLE {table} (...) USING parquet PARTITIONED BY (sale_date)), or fix the table name."
                ) from None
            raise
        described = conn.sql(f"DESCRIBE TABLE EXTENDED {qualified}").all()
        rows = [(str(r[0]).strip(), str(r[1])) for r in described]
        partitioning = partition_fields(rows)
        columns: dict[str, ColumnInfo] = {}
        types: dict[str, str] = {}
        for field in fields:
            type_name = field.dataType.simpleString()
            kind = self.column_kind(type_name)
            columns[field.name.lower()] = ColumnInfo(field.name, type_name, kind, field.nullable)
            types[field.name.lower()] = type_name
        # the identity fields: a transform's column is no partition column
        partitions = [f.name for f in fields if f.name in partitioning]
        details = dict(rows)
        chars = {
            f.name.lower(): int(match.group(1))
            for f in fields
            if (match := CHAR_TYPE.fullmatch(details.get(f.name, "").strip().lower()))
        }
        return SparkTableInfo(
            schema=schema,
            name=name,
            columns=columns,
            unique_keys=(),
            partition_columns=tuple(partitions),
            partitioning=partitioning,
            location=details.get("Location", ""),
            provider=details.get("Provider", "").lower(),
            spark_types=types,
            char_lengths=chars,
            padded_chars=any(
                str(f.metadata.get(CHAR_VARCHAR_KEY, "")).lower().startswith("char(") for f in fields
            ),
        )

    def column_kind(self, type_: Any) -> ColumnKind:
        name = str(type_).lower()
        if name == "date":
            return "date"
        if name in ("timestamp_ntz",):
            return "timestamp"
        if name == "timestamp":
            return "timestamptz"
        return "other"

    # ------------------------------------------------------------------ checksums
    def row_checksum(self, columns: Sequence[ColumnInfo]) -> exp.Expr:
        """v2: Spark's typed ``xxhash64`` over the columns in order, then a mask of which are NULL.

        xxhash64 skips a NULL argument, so ``(NULL, 'a')`` and ``('a', NULL)`` would hash alike: the
        mask (bit i set when column i is NULL, one BIGINT per NULL_MASK_BITS columns) tells them
        apart. Hashing typed values skips converting each to text: over a 1,000,000-row window about
        as cheap as ``count(*)``, 0.4 s less than v1 (docs/checksum.md). A column of a MAP type,
        which xxhash64 refuses, is hashed as its text. `hash_total` sums the BIGINT hashes exactly.
        """
        values: list[exp.Expr] = [
            exp.cast(self.column(c.name), "STRING") if "map<" in c.type_name.lower() else self.column(c.name)
            for c in columns
        ]
        for start in range(0, len(columns), NULL_MASK_BITS):
            bits = [
                exp.If(
                    this=exp.Is(this=self.column(c.name), expression=exp.Null()),
                    true=exp.Literal.number(1 << i),
                    false=exp.Literal.number(0),
                )
                for i, c in enumerate(columns[start : start + NULL_MASK_BITS])
            ]
            mask: exp.Expr = bits[0]
            for bit in bits[1:]:
                mask = exp.Add(this=mask, expression=bit)
            values.append(exp.cast(mask, "BIGINT"))
        return exp.Anonymous(this="XXHASH64", expressions=values)

    def hash_total(self, row_hash: exp.Expr) -> exp.Expr:
        """The exact sum of the BIGINT row hashes, as three BIGINT sums of 21/21/22-bit slices
        combined once in DECIMAL(38,0): ``sum(h) = sum(h >> 42) * 2^42 + sum(h >> 21 & M) * 2^21 +
        sum(h & M)`` (arithmetic shifts, M = 2^21 - 1), exact for windows under 2^41 rows.

        One SUM of BIGINTs overflows (an error under ANSI mode, a wrong sum without it); summing
        each hash CAST to DECIMAL(38,0), as this did before, gives the same figure but costs a
        BigDecimal per row: in local one-core Spark 0.8 s more per 1,000,000 rows observed in a
        write, 0.2 s in a read; on the test cluster a Delta read at a version showed no median gain
        (docs/checksum.md).
        """

        def sliced(shift: int, masked: bool) -> exp.Expr:
            part: exp.Expr = row_hash.copy()
            if shift:
                part = exp.BitwiseRightShift(this=part, expression=exp.Literal.number(shift))
            if masked:
                part = exp.BitwiseAnd(this=part, expression=exp.Literal.number(HASH_SLICE - 1))
            return exp.Sum(this=part)

        high = exp.Mul(
            this=exp.cast(sliced(2 * HASH_SLICE_BITS, False), "DECIMAL(38, 0)"),
            expression=exp.Literal.number(HASH_SLICE),
        )
        middle = exp.Mul(
            this=exp.paren(exp.Add(this=high, expression=sliced(HASH_SLICE_BITS, True))),
            expression=exp.Literal.number(HASH_SLICE),
        )
        total = exp.Add(this=middle, expression=sliced(0, True))
        return exp.func("COALESCE", total, exp.Literal.number(0))

    def partition_stats(self, table: str, partition_column: str, columns: Sequence[ColumnInfo]) -> exp.Select:
        """Per partition value of `table`: rows and the sum of row hashes, in one scan in the cluster."""
        check = self.window_checksum(table, partition_column, columns)
        count, total = check.expressions
        part = self.column(partition_column)
        return exp.select(part, count, total).from_(self.table(table)).group_by(part.copy())

    # ------------------------------------------------------------------ the partition switch
    def staging_name(self, table: str, attempt: str) -> str:
        """The attempt's staging table, in the target's catalog and schema (an Iceberg table's
        staging lives in its own catalog, so it is of the same format)."""
        catalog, schema, _ = table_parts(table)
        return ".".join(p for p in (catalog, schema, f"{STAGING_PREFIX}{attempt}") if p)

    def stage_view(
        self,
        conn: Any,
        view: str,
        location: str,
        info: SparkTableInfo,
        columns: Sequence[str],
        partition_column: str,
    ) -> None:
        """A temporary view (its session's own, no catalog call) over the staged files under
        `location`, typed as the target (`staging_rows`' columns, the partition column last, read
        from the ``column=value`` directories), so the checks and the guard's diff read the
        staging by name; an empty staging reads as no rows."""
        types = info.spark_types or {}
        ordered = [c for c in columns if c.lower() != partition_column.lower()]
        ordered.append(info.column(partition_column, "partition_column").name)
        schema = ", ".join(f"{self.ident(c)} {types[c.lower()]}" for c in ordered)
        frame = conn.session.read.format("parquet").schema(schema).load(location)
        frame.createOrReplaceTempView(validate_identifier(view))

    def staging_rows(
        self, info: SparkTableInfo, columns: Sequence[str], partition_column: str, query: exp.Expr
    ) -> exp.Select:
        """The staging's rows: `typed_rows` with the partition column last (where a partitioned
        parquet write puts it)."""
        ordered = [c for c in columns if c.lower() != partition_column.lower()]
        ordered.append(info.column(partition_column, "partition_column").name)
        return self.typed_rows(info, ordered, query)

    def typed_rows(
        self,
        info: SparkTableInfo,
        columns: Sequence[str],
        query: exp.Expr,
        produced: Sequence[str] | None = None,
    ) -> exp.Select:
        """SELECT `columns` FROM (query), each cast to the target's type, so staged rows are what
        the target would store and checksums compare like with like; NULL for a column the query
        does not produce (`produced`: the query's columns, all of `columns` by default)."""
        types = info.spark_types or {}
        chars = info.char_lengths or {}
        given = {c.lower() for c in (columns if produced is None else produced)}
        projections = []
        for name in columns:
            value = self.column(name, SOURCE_ALIAS) if name.lower() in given else exp.null()
            kind = exp.DataType.build(types[name.lower()], dialect="spark")
            typed: exp.Expr = exp.cast(value, kind)
            if name.lower() in chars:
                typed = self.padded(typed, chars[name.lower()])
            projections.append(exp.alias_(typed, exp.to_identifier(name, quoted=True)))
        return exp.select(*projections).from_(self.source(query))

    @staticmethod
    def padded(value: exp.Expr, length: int) -> exp.Expr:
        """A CHAR(`length`) value as the table reads it back: padded with spaces to its length
        (Spark pads CHAR when it reads, ``spark.sql.readSideCharPadding``, not when it writes), so
        staged rows hash and diff like the table's; a longer value is refused, as an INSERT
        into the column refuses it, instead of being cut."""
        size = exp.Length(this=value.copy())
        refuse = raise_error(CHAR_TOO_LONG)
        pad = exp.Pad(
            this=value,
            expression=exp.Literal.number(length),
            fill_pattern=exp.Literal.string(" "),
            is_left=False,
        )
        return exp.Case(
            ifs=[exp.If(this=exp.GT(this=size, expression=exp.Literal.number(length)), true=refuse)],
            default=pad,
        )

    def stage_window(
        self, name: str, table: str, info: TableInfo, columns: Sequence[str], query: exp.Expr
    ) -> list[exp.Expr]:
        """A preview's staging: a cached temporary view of the typed rows (``CACHE TABLE .. AS``),
        computed once and gone with the session; Spark has no transaction to roll a table back in."""
        assert isinstance(info, SparkTableInfo)
        return [
            exp.Cache(this=exp.to_table(name), lazy=False, expression=self.typed_rows(info, columns, query))
        ]

    def drop_staging(self, name: str, temporary: bool = True) -> exp.Drop:
        """A preview's staging is a temporary view (`stage_window`)."""
        return exp.Drop(kind="VIEW", tables=[self.table(name)], exists=True)

    def list_partitions(self, conn: Any, table: str, partition_column: str) -> dict[str, str]:
        """The table's partition values of `partition_column` -> their location (catalog only)."""
        rows = conn.sql(f"SHOW PARTITIONS {self.qualified(table)}").all()
        out: dict[str, str] = {}
        for (spec,) in rows:
            key, _, value = str(spec).partition("=")
            if key.lower() == partition_column.lower():
                out[value] = ""
        return out

    def staging_tables(self, conn: Any, table: str, prefix: str = STAGING_PREFIX) -> list[str]:
        """The lower-case names of the staging tables (named `prefix`..) in `table`'s catalog and
        schema: SHOW TABLES .. LIKE lists names only (the catalog's listTables reads every table's
        metadata, one call per table)."""
        catalog, schema, _ = table_parts(table)
        where = f" IN {'.'.join(self.ident(p) for p in (catalog, schema) if p)}" if schema else ""
        rows = conn.sql(f"SHOW TABLES{where} LIKE {self.literal(prefix + '*')}").all()
        return [str(name).lower() for _, name, temporary in rows if not temporary]

    def drop_kept(self, table: str) -> None:
        """Drop a kept stage once decided: a Delta or Iceberg table beside the target (an Iceberg
        one PURGEd: a plain DROP leaves its files). A failure is logged, not raised (a table gone
        already is nothing to decide on)."""
        try:
            with self.engine.connect() as conn:
                try:
                    purge = self.describe(conn, table).provider == "iceberg"
                except Exception:  # gone already, or unreadable: nothing to purge
                    purge = False
                conn.sql(self.drop_table(table, purge=purge))
        except Exception as err:
            log.warning("could not drop the kept stage %s (%s)", table, err)

    # ------------------------------------------------------------------ cleaning up
    def window_files(
        self, conn: Any, table: str, partition_column: str | None, params: Mapping[str, Any] | None = None
    ) -> list[str]:
        """The data files `table` reads (its window's, with a `partition_column` and the window
        bound in `params`), from the catalog's partition locations and a listing of their directories
        (``DataFrame.inputFiles``, after partition pruning): no row is read. Paths as Spark
        qualifies them (``file:///..``)."""
        query = exp.select(exp.Star()).from_(self.table(table))
        if partition_column is not None:
            query = query.where(self.in_window(partition_column))
        return sorted(str(f) for f in conn.sql(self.render(query, copy=False), params).frame.inputFiles())

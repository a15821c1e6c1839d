"""Write strategies: partition overwrite and merge, each one locked transaction.

Both run entirely inside the database (INSERT .. SELECT, upsert, DELETE): no row passes
through Python. Every check that can refuse the write runs inside the same transaction
before commit, so a refusal leaves the table exactly as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

from airflow_idempotent.adapters.base import EngineAdapter, TableInfo, rowcount
from airflow_idempotent.adapters.identifiers import validate_identifier
from airflow_idempotent.adapters.unique_source import keys_provably_unique
from airflow_idempotent.errors import MergeKeyError, RowsOutsideWindowError, SchemaError
from airflow_idempotent.window import Window
from airflow_idempotent.write_spec import RESERVED_PARAMS, PeriodResult, WriteResult, WriteSpec

log = logging.getLogger(__name__)

#: How many offending keys or values an error names.
SAMPLE_SIZE = 10


def prepare(
    adapter: EngineAdapter, conn: Connection, spec: WriteSpec, info: TableInfo | None = None
) -> tuple[TableInfo, list[str], dict[str, Any]]:
    """Check the target and the SELECT's columns; return the table, the columns and all bind values.

    The first step of every write of a window (overwrite, merge, the guarded write), inside its
    transaction: the target's spelling of the produced columns, the window bound by the partition
    column's type, and the user's parameters. `info`: the target as the caller just described it
    in this connection (described here otherwise).
    """
    if info is None:
        info = adapter.describe(conn, spec.table)
    params = dict(spec.params)
    if spec.partition_column is not None:
        part = info.column(spec.partition_column, "partition_column")
        if part.kind == "other":
            raise SchemaError(
                f"partition_column {part.name!r} of {info.qualified} has type {part.type_name}, not a date "
                "or timestamp: partition by a DATE or TIMESTAMP column, so the window can select it."
            )
        params.update(adapter.window_params(spec.window, part.kind))
    else:
        params.update(adapter.window_params(spec.window, "timestamptz"))
    produced = adapter.produced_columns(conn, spec.query, params)
    unknown = [c for c in produced if c.lower() not in info.columns]
    if unknown:
        raise SchemaError(
            f"the SELECT produces column(s) {unknown} that {info.qualified} does not have (it has "
            f"{', '.join(c.name for c in info.columns.values())}): alias the SELECT's columns to the "
            "target's."
        )
    duplicated = sorted({c for c in produced if [p.lower() for p in produced].count(c.lower()) > 1})
    if duplicated:
        raise SchemaError(f"the SELECT produces column(s) {duplicated} more than once: alias them apart.")
    if spec.partition_column is not None and spec.partition_column.lower() not in {
        c.lower() for c in produced
    }:
        raise SchemaError(
            f"the SELECT does not produce the partition column {spec.partition_column!r}: select it, so "
            "each row's window can be checked."
        )
    columns = [info.columns[c.lower()].name for c in produced]
    return info, columns, params


def window_binds(params: Mapping[str, Any]) -> dict[str, Any]:
    """Only the window's bind values of `params` (for statements over the target's window alone)."""
    return {k: params[k] for k in RESERVED_PARAMS}


def overwrite(adapter: EngineAdapter, spec: WriteSpec) -> WriteResult:
    """Delete the window and insert the SELECT's rows, in one transaction under the window's lock."""
    if spec.partition_column is None:
        raise SchemaError("partition overwrite needs a partition_column: the column the window selects.")
    diagnosis: dict[str, Any] = {}  # what names a key the database refused (`name_refused_keys`)
    try:
        with adapter.locked_transaction(spec.table, spec.lock_windows, spec.lock_timeout) as conn:
            info, columns, params = prepare(adapter, conn, spec)
            diagnosis.update(info=info, params=params)
            result = _overwrite_window(adapter, conn, spec, info, columns, params)
    except sa_exc.IntegrityError:
        if diagnosis:  # rolled back: name the keys (raises), else the database's own error
            name_refused_keys(adapter, spec, diagnosis["info"], diagnosis["params"])
        raise
    log.info(
        "overwrote %s for window %s: %d rows deleted, %d inserted (one transaction)",
        spec.table,
        spec.window.label(),
        result.rows_deleted,
        result.rows_inserted,
    )
    return result


def _overwrite_window(
    adapter: EngineAdapter,
    conn: Connection,
    spec: WriteSpec,
    info: TableInfo,
    columns: list[str],
    params: dict[str, Any],
) -> WriteResult:
    """The overwrite's statements, inside its transaction, up to the kill switch before commit."""
    assert spec.partition_column is not None
    window_only = window_binds(params)
    before = count_periods(adapter, conn, spec, info)
    deleted = rowcount(
        adapter.execute(conn, adapter.delete_window(spec.table, spec.partition_column), window_only)
    )
    inserted = rowcount(adapter.execute(conn, adapter.insert_select(spec.table, columns, spec.query), params))
    # The checksum query counts the window too: one scan gives both.
    row_count, checksum = checksum_window(adapter, conn, spec, info, window_only)
    in_window = row_count if row_count is not None else _window_count(adapter, conn, spec, window_only)
    if inserted < 0:
        inserted = _count_source(adapter, conn, spec, params)
    if in_window != inserted:
        raise_outside(adapter, conn, spec, params, inserted - in_window)
    result = WriteResult(
        "overwrite",
        spec.table,
        spec.window.label(),
        deleted,
        inserted,
        0,
        inserted,
        row_count,
        checksum,
        checksum_periods(adapter, conn, spec, info, before),
    )
    if spec.before_commit is not None:
        spec.before_commit()
    return result


def raise_outside(
    adapter: EngineAdapter,
    conn: Connection,
    spec: WriteSpec,
    params: Mapping[str, Any],
    count: int | None = None,
) -> None:
    """Refuse the SELECT's rows outside the window, naming a few (`count`: counted here if None)."""
    assert spec.partition_column is not None
    if count is None:
        counting = adapter.count_outside(spec.query, spec.partition_column)
        count = int(adapter.execute(conn, counting, params).scalar_one())
    rows = adapter.execute(
        conn, adapter.outside_sample(spec.query, spec.partition_column, SAMPLE_SIZE), params
    )
    sample = [str(r[0]) for r in rows]
    raise RowsOutsideWindowError(
        f"the SELECT produced {count} row(s) whose {spec.partition_column} is outside the window "
        f"{spec.window.label()} (e.g. {', '.join(sample)}): nothing was written. Filter the SELECT on "
        f"{spec.partition_column} >= :window_start AND {spec.partition_column} < :window_end."
    )


def merge(
    adapter: EngineAdapter, spec: WriteSpec, keys: Sequence[str], delete_missing: bool = False
) -> WriteResult:
    """Upsert the SELECT's rows on `keys`; optionally delete the window's rows the source lacks.

    Repeated or NULL source keys and rows outside the window are refused naming them, with nothing
    written. How they are found is what the database guarantees (`key_check`): the upsert refuses
    them itself, or its row count reveals them, and the key query runs only after that, to name
    them; otherwise the source's one counting pass also counts its distinct and NULL keys, and only
    a mismatch runs the key query. Where the upsert refuses both bad keys and rows outside the
    window (`refuses_rows_outside_in_statement`), the upsert is the only statement reading the
    source: its row count is the source's. The upsert never moves a row into the window from
    another (`stay_in_window`, or DuckDB's short row count); `raise_held_outside` names the keys.
    """
    if not keys:
        raise SchemaError("merge needs key_columns: the columns that identify a row, e.g. ['sale_id'].")
    for key in keys:
        validate_identifier(key, "key column")
    if delete_missing and spec.partition_column is None:
        raise SchemaError(
            "delete_missing=True needs a partition_column: without a window there is no set of rows "
            "the source is complete for."
        )
    # Set when the upsert itself reveals repeated or NULL keys (or rows outside the window): the
    # keys and binds to name them by.
    diagnosis: dict[str, Any] = {}
    try:
        with adapter.locked_transaction(spec.table, spec.lock_windows, spec.lock_timeout) as conn:
            info, columns, params = prepare(adapter, conn, spec)
            key_names = [info.column(k, "key column").name for k in keys]
            missing = [k for k in key_names if k not in columns]
            if missing:
                raise SchemaError(f"the SELECT does not produce the key column(s) {missing}: select them.")
            if not adapter.has_unique_key(conn, info, key_names):
                raise info.no_unique_key(key_names)
            how = key_check(adapter, info, key_names)
            partition = (
                None
                if spec.partition_column is None
                else info.column(spec.partition_column, "partition_column")
            )
            source_rows = -1  # until counted: by a pass over the source, or the upsert's row count
            # with how == "statement" and rows outside the window refused in the statement, the
            # upsert refuses every bad source itself: no pass over the source runs before it
            refused_in_statement = how == "statement" and (
                partition is None or adapter.refuses_rows_outside_in_statement
            )
            if how == "pass":
                check_keys(adapter, conn, spec, key_names, params)
                source_rows = _count_source(adapter, conn, spec, params)
            elif not refused_in_statement:
                # the distinct and NULL keys are counted unless the SELECT's shape and its table's
                # key already rule them out (`keys_provably_unique`)
                counted = (
                    key_names
                    if how == "counts" and not keys_provably_unique(adapter, conn, spec.query, key_names)
                    else ()
                )
                profile = adapter.source_profile(spec.query, spec.partition_column, counted)
                row = adapter.execute(conn, profile, params).one()
                source_rows, outside = int(row[0]), int(row[1] or 0)
                if counted and (int(row[3] or 0) or int(row[2] or 0) != source_rows):
                    check_keys(adapter, conn, spec, key_names, params)  # names them and raises
                    raise MergeKeyError(_repeated_keys(spec, key_names, source_rows, int(row[2] or 0)))
                if outside:  # a flag: `raise_outside` counts them for the refusal
                    raise_outside(adapter, conn, spec, params)
            # from here the database may refuse what the checks above left to it, and a row the
            # upsert would move out of another window (`stay_in_window`): what names them
            diagnosis.update(keys=key_names, params=params, info=info)
            window_only = window_binds(params)
            periods_before = count_periods(adapter, conn, spec, info)
            deleted = 0
            if delete_missing:
                assert spec.partition_column is not None
                stmt = adapter.delete_missing(spec.table, spec.partition_column, key_names, spec.query)
                deleted = rowcount(adapter.execute(conn, stmt, params))
            # what the upsert inserts: the database's own counter where it keeps one, else the
            # window's rows after it less those before it (`adapters.insert_counts`)
            tally = adapter.start_tally(
                conn, info, key_names, partition, lambda: _window_count(adapter, conn, spec, window_only)
            )
            upsert = adapter.upsert(spec.table, columns, key_names, spec.query, partition, info)
            upserted = adapter.execute(conn, upsert, params)
            written = rowcount(upserted)
            if source_rows < 0:  # one row written per source row, since repeated keys fail
                source_rows = written if written >= 0 else _count_source(adapter, conn, spec, params)
            if how == "rowcount" and written != source_rows:
                if written < 0:  # the driver did not count: look for them the slow way
                    check_keys(adapter, conn, spec, key_names, params)
                else:  # one row per repeated key was kept: roll back, then name them
                    raise MergeKeyError(_repeated_keys(spec, key_names, source_rows, written))
            if partition is not None and not adapter.refuses_moves_in_statement:
                if written < 0:  # the driver did not count: look for rows it skipped
                    raise_held_outside(adapter, conn, spec, info, key_names, params, moving=True)
                elif written != source_rows:  # the update's WHERE skipped a row: roll back, name it
                    raise MergeKeyError(_repeated_keys(spec, key_names, source_rows, written))
            row_count, checksum = checksum_window(adapter, conn, spec, info, window_only)
            inserted = tally.inserted(conn, info, upserted, source_rows, row_count)
            result = WriteResult(
                "merge",
                spec.table,
                spec.window.label(),
                deleted,
                inserted,
                source_rows - inserted,
                source_rows,
                row_count,
                checksum,
                checksum_periods(adapter, conn, spec, info, periods_before),
            )
            if spec.before_commit is not None:
                spec.before_commit()
    except (
        sa_exc.IntegrityError,
        sa_exc.ProgrammingError,
        sa_exc.DataError,
        sa_exc.OperationalError,
        MergeKeyError,
    ):
        if diagnosis:  # rolled back; name the keys or rows the database refused (these raise)
            with adapter.engine.connect() as conn:
                check_keys(adapter, conn, spec, diagnosis["keys"], diagnosis["params"])
                if spec.partition_column is not None:  # a row the upsert would move (`stay_in_window`)
                    raise_held_outside(
                        adapter, conn, spec, diagnosis["info"], diagnosis["keys"], diagnosis["params"], True
                    )
        raise  # not the source's keys or window: the database's own error, as it is
    log.info(
        "merged %s for window %s on %s: %d source rows, %d inserted, %d updated, %d deleted",
        spec.table,
        spec.window.label(),
        key_names,
        source_rows,
        result.rows_inserted,
        result.rows_updated,
        deleted,
    )
    return result


KeyCheck = Literal["statement", "rowcount", "counts", "pass"]


def key_check(adapter: EngineAdapter, info: TableInfo, keys: Sequence[str]) -> KeyCheck:
    """How a merge finds repeated or NULL source keys, by what the database guarantees:

    - ``statement``: the upsert fails on them (`upsert_refuses_repeated_keys`, NOT NULL keys);
    - ``rowcount``: the upsert's row count falls short of the source's (`upsert_counts_distinct_rows`,
      NOT NULL keys refused by the database);
    - ``counts``: the source's counting pass counts distinct and NULL keys too;
    - ``pass``: a key pass of its own (a multi-column key where COUNT(DISTINCT) takes one column).

    In every case the keys are named by `check_keys` and nothing is written.
    """
    not_null = not any(info.column(k, "key column").nullable for k in keys)
    if not_null and adapter.upsert_refuses_repeated_keys:
        return "statement"
    if not_null and adapter.upsert_counts_distinct_rows:
        return "rowcount"
    if len(keys) == 1 or adapter.counts_distinct_tuples:
        return "counts"
    return "pass"


def _repeated_keys(spec: WriteSpec, keys: Sequence[str], source_rows: int, distinct: int) -> str:
    """The refusal when the keys could be counted but not named (they changed between two reads)."""
    return (
        f"the merge source has {source_rows} rows but {distinct} distinct non-NULL key(s) on "
        f"({', '.join(keys)}) for window {spec.window.label()}: nothing was written. Make the SELECT "
        "return one row per key (deduplicate, or add the missing key columns), and filter out NULL keys."
    )


def checksum_window(
    adapter: EngineAdapter, conn: Connection, spec: WriteSpec, info: TableInfo, params: Mapping[str, Any]
) -> tuple[int | None, str | None]:
    """The window's row count and result checksum as this transaction will commit them
    (None, None without `spec.checksum` or a partition column): what history records."""
    if not spec.checksum or spec.partition_column is None:
        return None, None
    query = adapter.window_checksum_sql(spec.table, spec.partition_column, list(info.columns.values()))
    count, total = adapter.execute(conn, query, params).one()
    return int(count), adapter.checksum_text(int(count), total)


def period_binds(adapter: EngineAdapter, info: TableInfo, spec: WriteSpec, period: Window) -> dict[str, Any]:
    """The bind values of one covered period's window (its partition column's kind decides their type)."""
    assert spec.partition_column is not None
    kind = info.column(spec.partition_column, "partition_column").kind
    return adapter.window_params(period, kind)


def count_periods(adapter: EngineAdapter, conn: Connection, spec: WriteSpec, info: TableInfo) -> list[int]:
    """Each covered period's rows now, oldest first (empty without lookback): one count each."""
    if not spec.periods or spec.partition_column is None:
        return []
    query = adapter.count_window(spec.table, spec.partition_column)
    return [
        int(adapter.execute(conn, query, period_binds(adapter, info, spec, p)).scalar_one())
        for p in spec.periods
    ]


def checksum_periods(
    adapter: EngineAdapter, conn: Connection, spec: WriteSpec, info: TableInfo, before: Sequence[int]
) -> tuple[PeriodResult, ...]:
    """Each covered period's row count and checksum as this transaction will commit them, by the
    same query as `checksum_window` (so a period written with lookback compares with one written
    alone); `before` is `count_periods` from before the write. Empty without lookback."""
    if not spec.periods or spec.partition_column is None:
        return ()
    out = []
    for period, rows_before in zip(spec.periods, before, strict=True):
        binds = period_binds(adapter, info, spec, period)
        if spec.checksum:
            query = adapter.window_checksum_sql(
                spec.table, spec.partition_column, list(info.columns.values())
            )
            count, total = adapter.execute(conn, query, binds).one()
            text: str | None = adapter.checksum_text(int(count), total)
        else:
            count = adapter.execute(
                conn, adapter.count_window(spec.table, spec.partition_column), binds
            ).scalar_one()
            text = None
        out.append(PeriodResult(period, rows_before, int(count), text))
    return tuple(out)


def _count_source(
    adapter: EngineAdapter, conn: Connection, spec: WriteSpec, params: Mapping[str, Any]
) -> int:
    return int(adapter.execute(conn, adapter.count_source(spec.query), params).scalar_one())


def _window_count(
    adapter: EngineAdapter, conn: Connection, spec: WriteSpec, params: Mapping[str, Any]
) -> int:
    if spec.partition_column is None:
        return -1
    return int(
        adapter.execute(conn, adapter.count_window(spec.table, spec.partition_column), params).scalar_one()
    )


def check_keys(
    adapter: EngineAdapter,
    conn: Connection,
    spec: WriteSpec,
    keys: Sequence[str],
    params: Mapping[str, Any],
    source: str = "the merge source",
    rows: Sequence[Sequence[Any]] | None = None,
) -> None:
    """Refuse NULL or duplicate keys and rows outside the window, naming them, before any write
    (a merge's source, a guarded write's staged rows) or after the database refused them; from
    `rows` when `key_problems`' columns were already read (Spark's `spark.merges.check_merge_source`)."""
    if rows is None:
        rows = adapter.execute(
            conn, adapter.key_problems(spec.query, keys, spec.partition_column, SAMPLE_SIZE + 1), params
        ).all()
    nulls: list[str] = []
    dups: list[str] = []
    outside: list[str] = []
    for row in rows:
        key = tuple(row[: len(keys)])
        shown = str(key[0]) if len(key) == 1 else str(key)
        count, out = int(row[len(keys)]), int(row[len(keys) + 1] or 0)
        if any(v is None for v in key):
            nulls.append(f"{shown} ({count} rows)")
        elif count > 1:
            dups.append(f"{shown} ({count} rows)")
        if out:
            outside.append(shown)
    if nulls or dups:
        parts = []
        if dups:
            parts.append(f"duplicate key(s) {', '.join(dups[:SAMPLE_SIZE])}")
        if nulls:
            parts.append(f"NULL key(s) {', '.join(nulls[:SAMPLE_SIZE])}")
        raise MergeKeyError(
            f"{source} has {' and '.join(parts)} on ({', '.join(keys)}): nothing was written. "
            "Make the SELECT return one row per key (deduplicate, or add the missing key columns), "
            "and filter out NULL keys."
        )
    if outside:  # the sample holds at most SAMPLE_SIZE + 1 keys: `raise_outside` counts the rows
        raise_outside(adapter, conn, spec, params)


def name_refused_keys(
    adapter: EngineAdapter, spec: WriteSpec, info: TableInfo, params: Mapping[str, Any]
) -> None:
    """After an overwrite or a swap broke one of the target's unique or NOT NULL keys (rolled
    back), say why, for each of the table's unique keys: the SELECT repeats a key or leaves it
    NULL, has rows outside the window (`check_keys`), or carries a key the table holds in a row
    outside the window, which the window's DELETE leaves in place. Raises MergeKeyError or
    RowsOutsideWindowError; returns when none holds, for the caller to raise the database's error."""
    if spec.partition_column is None:
        return
    with adapter.engine.connect() as conn:
        for unique in info.unique_keys:
            keys = [c.name for c in info.columns.values() if c.name.lower() in unique]
            check_keys(adapter, conn, spec, keys, params, source="the SELECT")
            raise_held_outside(adapter, conn, spec, info, keys, params, moving=False)


def raise_held_outside(
    adapter: EngineAdapter,
    conn: Connection,
    spec: WriteSpec,
    info: TableInfo,
    keys: Sequence[str],
    params: Mapping[str, Any],
    moving: bool,
    rows: Sequence[Sequence[Any]] | None = None,
) -> None:
    """Refuse the SELECT's keys that the table holds in rows outside the window, naming a few: an
    overwrite's INSERT would break the key (the DELETE leaves those rows), a merge (`moving`) would
    move the rows out of a window it neither locks nor records. From `rows` (the keys and the
    partition value they are held at) when already read (Spark's `spark.merges.check_merge_source`)."""
    assert spec.partition_column is not None
    if rows is None:
        held = adapter.keys_held_outside(spec.table, spec.query, keys, spec.partition_column, SAMPLE_SIZE)
        rows = adapter.execute(conn, held, params).all()
    rows = rows[:SAMPLE_SIZE]
    if not rows:
        return
    shown = ", ".join(
        f"{r[0] if len(keys) == 1 else tuple(r[: len(keys)])} ({spec.partition_column} {r[-1]})" for r in rows
    )
    if moving:
        fix = (
            "A merge of one window does not move rows out of another, which it neither locks nor "
            "records: correct the SELECT's keys, or rewrite both windows in one run (lookback)."
        )
    else:
        fix = (
            "A key lives in one window: correct the SELECT's keys or the rows outside the window, "
            "or, if rows move between windows, rewrite both windows in one run (lookback)."
        )
    raise MergeKeyError(
        f"the SELECT writes key(s) on ({', '.join(keys)}) that {info.qualified} already holds outside "
        f"the window {spec.window.label()}, e.g. {shown}: nothing was written. {fix}"
    )

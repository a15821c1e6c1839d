"""Crash-safe window overwrite for engines without transactions: stage, verify, switch in the catalog.

Every plain `INSERT OVERWRITE` breaks the contract on partitioned parquet tables (measured: a
static overwrite deletes the old files before its job runs, a dynamic one keeps stale days and
tears a month when killed). This protocol never touches the files the target reads:

1. Lock the (table, window) in the history store (the engine has no lock of its own).
2. Recover: finish a switch a dead attempt recorded but did not complete (every operation is
   idempotent), interrupt what that attempt left running in its engine session, and drop the
   staging table a plan recorded before staging became plain files (the files of an abandoned
   attempt are swept with its location).
3. Stage: record the attempt, then write the window's SELECT as parquet files into a fresh
   per-attempt location, one ``column=value`` directory per day (the layout a partition reads),
   each column cast to the target's type. No catalog table: registering a month's 31 staged
   partitions and dropping the table again cost 1.5-2.6 s per write (bench/results/spark.md); the
   checks read the files through a temporary view of the session, gone with it.
4. Verify: the staged files are listed (their directories name the staged days: a value outside
   the window, or NULL, refuses the write before anything is replaced), then one scan of them
   gives the window's count and checksum. The target window's rows now (a footer-only count) and
   the directories it reads (file index, no row read) are read while step 3 writes.
5. Plan: per date of the window, SET LOCATION (the day exists: all in one catalog call where the
   Connect server has the provider's command (`spark/command`), else SQL scripts of up to 8),
   ADD PARTITION (a new day) or DROP PARTITION (the window no longer has it: an empty window
   really is emptied, a month is replaced whole). The plan is recorded in the history store
   before the first operation.
6. Switch under the table's catalog lock, REFRESH TABLE for readers, check that the target's
   window now reads exactly the staged files (whose count and checksum step 4 verified; the
   catalog's locations and a listing prove it without a second scan), mark the plan done.
7. Sweep (`sweep`): delete the replaced directories and the locations of attempts no partition
   reads, through a throw-away managed table; keep whatever an unfinished plan still needs.

A crash anywhere leaves each partition pointing at a complete location (old or new). A killed
task's statement may still finish on the server: before a retry runs anything it interrupts the
dead attempt's session, and its only possibly-late statement (one operation of its recorded plan)
is one the retry re-applies anyway, so it changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import pendulum

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.adapters.locks import lock_timeout_error
from airflow_idempotent.errors import (
    LockTimeoutError,
    RowsOutsideWindowError,
    SchemaError,
    UnsupportedConnectionError,
)
from airflow_idempotent.history import switches
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.spark.adapter import (
    ATTEMPTS_DIR,
    NULL_DIRECTORY,
    STAGING_PREFIX,
    TRASH_PREFIX,
    SparkAdapter,
    SparkTableInfo,
)
from airflow_idempotent.spark.steps import step
from airflow_idempotent.strategies import SAMPLE_SIZE, prepare
from airflow_idempotent.window import Window
from airflow_idempotent.write_spec import RESERVED_PARAMS, WriteResult, WriteSpec

log = logging.getLogger(__name__)

#: Table formats with a transaction log of their own, whose partitions the switch must not move.
TABLE_FORMATS = ("delta", "iceberg")
#: The protocol's steps, in order, as `steps.step_hook` sees them (the crash matrix kills at each).
STEPS = ("locked", "recorded", "staged", "verified", "planned", "switched_one", "switched", "done")
#: Looks at a verified staging before anything is switched (the guard's diff); raising refuses the
#: write and abandons its plan: (conn, staging view, info, columns, params, checksum).
Inspect = Callable[[Any, str, SparkTableInfo, list[str], dict[str, Any], str], None]
#: The window the table-wide catalog lock is named with (it covers every window of the table).
_WHOLE_TABLE = Window(
    start=pendulum.datetime(1970, 1, 1, tz="UTC"), end=pendulum.datetime(1970, 1, 2, tz="UTC"), source="lock"
)


def _days(window: Window) -> tuple[date, date]:
    """The window's first and past-the-end date; it must be whole days (a DATE partition each)."""
    if not window.is_date_aligned:
        raise SchemaError(
            f"window {window.label()} is not whole days, but the table is partitioned by a DATE: a "
            "partition is replaced whole, so write day, week or month windows (granularity='day')."
        )
    return window.start_date(), window.end_date()


def _check_table(info: SparkTableInfo, partition_column: str) -> str:
    if info.provider in TABLE_FORMATS:
        raise UnsupportedConnectionError(
            f"{info.qualified} is a {info.provider} table: the partition switch (and the "
            "guard over it) moves parquet partitions only. A Delta or Iceberg table is written by "
            "PartitionOverwriteOperator and MergeOperator without a guard; the guard on these formats "
            "is not built yet."
        )
    part = info.column(partition_column, "partition_column")
    if [p.lower() for p in info.partition_columns] != [part.name.lower()]:
        raise SchemaError(
            f"{info.qualified} is partitioned by {list(info.partition_columns) or 'nothing'}, not by "
            f"{part.name!r} alone: create it with PARTITIONED BY ({part.name}) so each date of the window "
            "is a partition that can be switched whole."
        )
    if part.kind != "date":
        raise SchemaError(
            f"partition column {part.name!r} of {info.qualified} is {part.type_name}, not a DATE: the "
            "partition switch replaces whole dates; partition the table by a DATE column."
        )
    return part.name


@contextlib.contextmanager
def store_lock(store: HistoryStore, key: str, window: Window, timeout: float) -> Iterator[None]:
    """The (key, window) lock, held in the history store's database for engines with none of their own.

    Held for minutes while the engine works, so a session lock (the store adapter's
    `session_lock`: advisory, GET_LOCK or a flock), never a transaction; the database or the
    kernel drops it when the holding process dies. Times out like every lock: LockTimeoutError.
    """
    adapter = adapter_for(store.engine)
    try:
        with adapter.session_lock(f"{key}|{window.label()}", timeout):
            yield
    except LockTimeoutError as err:
        raise lock_timeout_error(key, window.label(), timeout, str(err)) from err


def _interrupt(adapter: SparkAdapter, session_id: str | None) -> None:
    """Interrupt every operation a dead attempt left running in its session, then release it."""
    if not session_id:
        return
    try:
        with adapter.engine.connect(session_id) as old:
            interrupted = old.session.interruptAll()
        if interrupted:
            log.warning("interrupted %d operation(s) of dead session %s", len(interrupted), session_id)
    except Exception as err:  # the session may be gone already: nothing of it runs then
        log.info("session %s not interrupted (%s)", session_id, err)


def _apply(
    adapter: SparkAdapter,
    conn: Any,
    table: str,
    partition_column: str,
    ops: list[dict[str, str]],
    replay: bool = False,
) -> None:
    """Run a plan's catalog operations: every new day in one ADD, the moved days in one catalog
    call where the Connect server has the provider's command (`set_locations`: the metastore moves
    all in one transaction, ~3x cheaper than 31 SET LOCATIONs), else their SET LOCATIONs in SQL
    scripts of `MOVES_PER_SCRIPT` (a round trip for 8 instead of one a day: a month's 31 took 5.2-14 s
    one by one, 1.8-5.2 s as one script, measured on the test cluster), every emptied day in one
    DROP, then REFRESH. Each call is idempotent and leaves every partition it names at a complete
    location (old or new), so a plan can be run again whole.

    `switched_one` fires after the first catalog change (the ADD, else the moves' call or the
    first day's SET LOCATION, else the DROP): a crash there leaves the rest of the plan undone.

    Between two calls a reader sees each day whole, some new and some old. One DROP of the
    moved days and one ADD back would be 2-3.6x cheaper (1.9-3.3 s against 6.9 s for a month at
    load 11) but shows the reader an empty window in between, deletes a managed table's old
    directories at the DROP and, killed in between, leaves days missing until the rerun: not done.

    `replay` (recovery of a dead attempt's plan): ADD IF NOT EXISTS keeps the location of a day that
    exists already (the dead attempt's ADD may have landed, or another plan added the day since), so
    each added day's location is also set, as the plan says.
    """
    where = {op["value"]: op.get("location", "") for op in ops}
    added = [date.fromisoformat(op["value"]) for op in ops if op["op"] == "add"]
    moved = [date.fromisoformat(op["value"]) for op in ops if op["op"] == "set"]
    dropped = [date.fromisoformat(op["value"]) for op in ops if op["op"] == "drop"]
    moves = [(d, where[d.isoformat()]) for d in ([*added, *moved] if replay else moved)]
    first = True  # the plan's first catalog change is still to come: `switched_one` follows it
    if added:
        conn.sql(adapter.add_partitions(table, partition_column, [(d, where[d.isoformat()]) for d in added]))
        step("switched_one")
        first = False
    if moves and adapter.set_locations(conn, table, partition_column, moves):
        moves = []
        if first:
            step("switched_one")
            first = False
    elif moves and first:
        conn.sql(adapter.set_location(table, partition_column, *moves[0]))
        step("switched_one")
        first, moves = False, moves[1:]
    adapter.move_partitions(conn, table, partition_column, moves)
    if dropped:
        conn.sql(adapter.drop_partitions(table, partition_column, dropped))
        if first:
            step("switched_one")
    conn.sql(adapter.refresh(table))


def _recover(
    adapter: SparkAdapter, conn: Any, store: HistoryStore, spec: WriteSpec, target: str, partition_column: str
) -> int:
    """Complete or abandon what dead attempts on this table left; return how many plans."""
    done = 0
    for plan in switches.unfinished(store, target):
        window = Window(
            start=pendulum.instance(plan.window_start), end=pendulum.instance(plan.window_end), source="plan"
        )
        mine = window.start == spec.window.start and window.end == spec.window.end
        try:  # the plan of another window: only if its attempt is dead (its lock is free)
            held = contextlib.nullcontext() if mine else store_lock(store, f"switch:{target}", window, 0.0)
            with held:
                _interrupt(adapter, plan.session_id)
                if plan.status == switches.SWITCHING:
                    log.warning(
                        "completing the switch of dead attempt %s (%s)", plan.attempt_id, window.label()
                    )
                    _apply(adapter, conn, spec.table, partition_column, plan.operations, replay=True)
                    switches.set_status(store, plan.attempt_id, switches.DONE)
                else:
                    switches.set_status(store, plan.attempt_id, switches.ABANDONED)
                if plan.staging_table:  # a catalog table: recorded by plans from before plain files
                    conn.sql(adapter.drop_table(plan.staging_table))
                done += 1
        except LockTimeoutError:
            continue
    return done


@dataclass(frozen=True)
class Staged:
    """What the switch knows of a written staging before its plan."""

    days: set[date]  # the window's days with rows (each a directory of staged files)
    rows: int  # rows inside the window, and their checksum sum
    total: Decimal
    outside: list[tuple[date | None, int]]  # values outside the window (None: NULL) and their rows
    deleted: int  # the rows the target's window holds now
    files: list[str]  # the staged files, which the switch moves in
    replaced: list[str]  # the directories the target's window reads now


def staged_values(files: list[str]) -> set[date | None]:
    """The partition values of staged files, from their ``column=value`` directories (None: Spark's
    directory of NULL): a partitioned write makes a directory only for a value it has rows of."""
    values: set[date | None] = set()
    for path in files:
        value = unquote(path.rsplit("/", 2)[-2].split("=", 1)[1])
        values.add(None if value == NULL_DIRECTORY else date.fromisoformat(value))
    return values


def _now(
    adapter: SparkAdapter, conn: Any, table: str, column: str, window_only: dict[str, Any]
) -> tuple[int, list[str]]:
    """The rows the target's window holds now (a ``count(*)``, answered from the parquet footers)
    and the directories it reads (the file index: no row read)."""
    deleted = int(conn.sql(adapter.render(adapter.count_window(table, column)), window_only).scalar_one())
    dirs = sorted({f.rsplit("/", 1)[0] for f in adapter.window_files(conn, table, column, window_only)})
    return deleted, dirs


def _stage(
    adapter: SparkAdapter,
    conn: Any,
    spec: WriteSpec,
    info: SparkTableInfo,
    columns: list[str],
    params: dict[str, Any],
    staging: str,
    location: str,
    column: str,
) -> Staged:
    """Write the staging (files under `location`, read through the temporary view `staging`) and
    verify it. The figures are those of the staged files' rows, which the switch moves in
    (`_check_switched` proves the window then reads exactly these files).

    The staged days, and any value outside the window, are the staged files' directories (a
    listing); then one query scans the staged files for the window's count and checksum, with no
    GROUP BY. Only a staging with rows outside the window is scanned per value, to name them. The
    target window's rows and directories now are read while the staging is written (a thread on
    the same session: read-only, under the store lock). Over a 1,000,000-row month the verify step
    went 0.74-0.76 -> 0.38-0.39 s on a quiet machine, but the write took ~0.3 s longer (the count
    shares the two cores): staged + verified 1.52-1.58 -> 1.48-1.51 s; at load 3.4-5.6 the verify
    step went 1.82 -> 0.66 s (bench/results/spark.md).

    Counting and hashing the rows as the staging write writes them (``DataFrame.observe``) instead
    moved the hashing into the write rather than saving it: three quiet runs showed no gain
    (bench/results/spark.md), so the staged files are scanned.
    """
    window_only = {k: params[k] for k in RESERVED_PARAMS}
    start, end = _days(spec.window)
    rows = adapter.render(adapter.staging_rows(info, columns, column, spec.query), copy=False)
    pool = ThreadPoolExecutor(1, thread_name_prefix="idem-window-now")
    now = pool.submit(_now, adapter, conn, spec.table, column, window_only)
    try:
        conn.sql(rows, params).frame.write.format("parquet").partitionBy(column).mode("error").save(location)
    finally:
        pool.shutdown(wait=True)  # nothing of this session runs on after the write
    deleted, replaced = now.result()
    adapter.stage_view(conn, staging, location, info, columns, column)
    step("staged")
    files = adapter.window_files(conn, staging, None)
    values = staged_values(files)
    days = {v for v in values if v is not None and start <= v < end}
    cols = list(info.columns.values())
    if values - days:  # refused: the rows of each value outside the window, to name them
        stats = conn.sql(adapter.render(adapter.partition_stats(staging, column, cols))).all()
        outside = [(v, int(n)) for v, n, _ in stats if v is None or not (start <= v < end)]
        return Staged(days, 0, Decimal(0), outside, deleted, files, replaced)
    count, total = conn.sql(adapter.render(adapter.window_checksum(staging, column, cols)), window_only).one()
    return Staged(days, int(count), Decimal(total), [], deleted, files, replaced)


def _plan(
    existing: set[date], staged: set[date], start: date, end: date, location: str, column: str
) -> list[dict[str, str]]:
    ops: list[dict[str, str]] = []
    day = start
    while day < end:
        where = f"{location}/{column}={day.isoformat()}"
        if day in staged:
            ops.append(
                {"op": "set" if day in existing else "add", "value": day.isoformat(), "location": where}
            )
        elif day in existing:
            ops.append({"op": "drop", "value": day.isoformat()})
        day += timedelta(days=1)
    return ops


def sweep(
    adapter: SparkAdapter,
    conn: Any,
    store: HistoryStore,
    target: str,
    table: str,
    column: str,
    attempt: str,
    replaced: list[str],
) -> None:
    """After a successful switch, delete what no partition reads any more, so disk use stays bounded:

    the directories the switch replaced; the whole location of every attempt that is over and no
    partition reads (abandoned, or done and each of its days switched again since, as the plans in
    history say), with the staged files of each; and this target's staging tables of finished
    attempts (catalog tables, from before staging became plain files). Whatever a recorded
    unfinished switch still needs (anything under its location) is kept. A failure here is
    logged, never raised: the write is done.
    """
    try:
        live = switches.unfinished(store, target)
        needed = [p.location for p in live]
        over = switches.plans(store, target, (switches.DONE, switches.ABANDONED))
        owner: dict[str, str] = {}
        for plan in over:  # oldest first: which attempt's directory each day reads now
            for op in plan.operations if plan.status == switches.DONE else ():
                if op["op"] == "drop":
                    owner.pop(op["value"], None)
                else:
                    owner[op["value"]] = plan.attempt_id
        dead = [p for p in over if p.attempt_id not in set(owner.values())]
        dirs = [*replaced, *(p.location for p in dead)]
        kept = [d for d in dirs if any(_path(d).startswith(_path(n)) for n in needed)]
        doomed = sorted({d for d in dirs if d not in kept})
        if doomed:
            trash = adapter.staging_name(table, attempt).replace(STAGING_PREFIX, TRASH_PREFIX, 1)
            adapter.run_statements(conn, adapter.trash_statements(trash, table, column, doomed))
        for plan in dead:
            switches.set_status(store, plan.attempt_id, switches.SWEPT)
        finished = switches.plans(store, target, (switches.DONE, switches.ABANDONED, switches.SWEPT))
        tables = [p.staging_table for p in finished if p.staging_table]  # plans from before plain files
        present = set(adapter.staging_tables(conn, table)) if tables else set()
        for name in tables:  # this target's staging tables only, of attempts that are over
            if name.split(".")[-1].lower() in present:
                conn.sql(adapter.drop_table(name))
        log.info("swept %d directories of %s (kept %d a switch needs)", len(doomed), table, len(kept))
    except Exception as err:  # the write is done; the next one sweeps again
        log.warning("sweeping old directories of %s failed (%s): left for the next write", table, err)


def _path(location: str) -> str:
    """A location without its scheme (file:/x and /x name one directory), ending in '/'."""
    path = location.split(":", 1)[1] if location.startswith(("file:", "hdfs:", "s3a:")) else location
    return "/" + path.lstrip("/").rstrip("/") + "/"


def _check_switched(
    adapter: SparkAdapter,
    conn: Any,
    spec: WriteSpec,
    column: str,
    window_only: dict[str, Any],
    staged_files: list[str],
    checksum: str,
) -> None:
    """After the switch, the window must read exactly the staged files, whose count and checksum
    were verified: the catalog's locations and a listing prove it, without reading a row again
    (the count and checksum scan it replaces took 1.0 s of a 1,000,000-row window's 8.9 s). A day
    the switch missed, or a partition or file another writer added, is a file of another list."""
    now = {_path(f) for f in adapter.window_files(conn, spec.table, column, window_only)}
    staged = {_path(f) for f in staged_files}
    if now != staged:
        stray = sorted(now ^ staged)
        raise SchemaError(
            f"after the switch {spec.table} window {spec.window.label()} reads {len(now)} file(s), not "
            f"the {len(staged)} file(s) staged and verified ({checksum}); e.g. {stray[0].rstrip('/')} is "
            "in one list only: another writer changed the table outside this provider; rerun the task."
        )


def overwrite_by_switch(
    adapter: SparkAdapter,
    spec: WriteSpec,
    store: HistoryStore,
    target: str,
    attempt_id: str | None = None,
    inspect: Inspect | None = None,
    info: SparkTableInfo | None = None,
) -> WriteResult:
    """Replace the window of `spec.table` by the SELECT's rows, crash-safe (see the module).

    `info`: the table as the caller just described it (a description less: two round trips).

    `inspect` (the guard's diff and stop conditions) and `spec.before_commit` (the kill switch)
    run after the staging is verified and before the plan is recorded: raising there switches
    nothing and marks the attempt abandoned (its staged files are swept with its location).
    """
    if spec.partition_column is None:
        raise SchemaError(
            "partition overwrite needs a partition_column: the DATE column the table is partitioned by."
        )
    start, end = _days(spec.window)
    attempt = attempt_id or uuid.uuid4().hex[:20]
    store.migrate()
    with (
        store_lock(store, f"switch:{target}", spec.window, spec.lock_timeout),
        adapter.engine.connect() as conn,
    ):
        step("locked")
        described, columns, params = prepare(adapter, conn, spec, info)  # type: ignore[arg-type]
        assert isinstance(described, SparkTableInfo)
        info = described
        column = _check_table(info, spec.partition_column)
        with store_lock(store, f"switch-catalog:{target}", _WHOLE_TABLE, spec.lock_timeout):
            _recover(adapter, conn, store, spec, target, column)
        window_only = {k: params[k] for k in RESERVED_PARAMS}
        staging = f"{STAGING_PREFIX}{attempt}"  # the staged files' temporary view, gone with the session
        location = f"{info.location.rstrip('/')}/{ATTEMPTS_DIR}/{attempt}"
        # no staging table to record (""): a plan from before plain-file staging names its table
        switches.begin(
            store, attempt, target, spec.window.start, spec.window.end, conn.session_id, "", location
        )
        step("recorded")
        staged = _stage(adapter, conn, spec, info, columns, params, staging, location, column)
        replaced = staged.replaced
        if staged.outside:
            switches.set_status(store, attempt, switches.ABANDONED)
            sample = ", ".join(str(v) for v, _ in staged.outside[:SAMPLE_SIZE])
            rows = sum(n for _, n in staged.outside)
            raise RowsOutsideWindowError(
                f"the SELECT produced {rows} row(s) whose {column} is outside the window "
                f"{spec.window.label()} (e.g. {sample}): nothing was replaced. Filter the SELECT on "
                f"{column} >= :window_start AND {column} < :window_end."
            )
        inserted, deleted, staged_files = staged.rows, staged.deleted, staged.files
        checksum = adapter.checksum_text(inserted, staged.total)
        step("verified")
        try:
            if inspect is not None:
                inspect(conn, staging, info, columns, params, checksum)
            if spec.before_commit is not None:
                spec.before_commit()  # e.g. the kill switch: raising here replaces nothing
        except BaseException:
            switches.set_status(store, attempt, switches.ABANDONED)
            raise
        existing = {date.fromisoformat(v) for v in adapter.list_partitions(conn, spec.table, column)}
        ops = _plan(existing, staged.days, start, end, location, column)
        switches.set_status(
            store, attempt, switches.SWITCHING, operations=ops, row_count=inserted, checksum=checksum
        )
        step("planned")
        with store_lock(store, f"switch-catalog:{target}", _WHOLE_TABLE, spec.lock_timeout):
            _apply(adapter, conn, spec.table, column, ops)
        step("switched")
        _check_switched(adapter, conn, spec, column, window_only, staged_files, checksum)
        switches.set_status(store, attempt, switches.DONE)
        step("done")
        sweep(adapter, conn, store, target, spec.table, column, attempt, replaced)
    log.info(
        "switched %s window %s: %d partition operation(s), %d rows replaced by %d (checksum %s)",
        spec.table,
        spec.window.label(),
        len(ops),
        deleted,
        inserted,
        checksum,
    )
    return WriteResult(
        "overwrite", spec.table, spec.window.label(), deleted, inserted, 0, inserted, inserted, checksum
    )

"""Delta Lake tables on Spark: each window written by ONE commit of the engine's own.

- Overwrite: ``INSERT INTO t REPLACE WHERE <window> SELECT ..``'s plan, sent as
  ``writeTo(t).overwrite(<window>)`` so its rows are counted as written (`observed`): the window's
  old rows go and the SELECT's rows come in one commit; an empty SELECT empties the window, a month
  is replaced whole, on any column (partition or not, DATE or TIMESTAMP). Delta refuses the commit
  when a row falls outside the predicate (its constraint check, switched on for the statement); the
  provider then names those rows as on the SQL engines (`strategies.raise_outside`), and nothing was
  committed.
- Merge: ``MERGE INTO t USING (SELECT ..) ON keys AND <window on t>``, its source refusing in the
  statement, before the commit, repeated or NULL keys, rows outside the window and keys the table
  holds in another window (`spark.merges.folded_source`), since Delta inserts a repeated key that
  matches nothing twice and cannot see another window; after such a refusal the rows are named as
  on the SQL engines (`spark.merges.refusals_named`), and nothing was committed.
  `delete_missing` is ``WHEN NOT MATCHED BY SOURCE AND <window on t> THEN DELETE``, in that commit.

Each commit carries the attempt's identity as its user metadata (`commit_tag`), so the commit is
found by its tag, not as "the latest" (another window may commit between): the session's last commit
read from the table's log (`session_commit`), else searched in the table's history,
and a rerun after a crash can tell whether an earlier try's commit landed (`tagged_commits`). The
count and checksum are that commit's, never a later state: an overwrite's from the rows it
wrote when its metrics agree (`observed.trusted`), else read at its version (``VERSION AS OF``);
the version is returned with the result (history records it with the write).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from airflow_idempotent.adapters.base import SOURCE_ALIAS
from airflow_idempotent.adapters.identifiers import table_parts
from airflow_idempotent.adapters.source_checks import TARGET_ALIAS
from airflow_idempotent.errors import SchemaError
from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkTableInfo
from airflow_idempotent.spark.merges import checked_merge_source, folded_source, refusals_named
from airflow_idempotent.spark.observed import Observed, observable, trusted, window_aggregates, write_observed
from airflow_idempotent.spark.retry import retry_conflicts
from airflow_idempotent.spark.steps import step
from airflow_idempotent.strategies import period_binds, prepare, raise_outside, window_binds
from airflow_idempotent.write_spec import PeriodResult, WriteResult, WriteSpec

log = logging.getLogger(__name__)

#: The catalog's provider of a Delta table (DESCRIBE TABLE EXTENDED's "Provider").
DELTA = "delta"
#: The session conf whose value Delta writes into the commit's `userMetadata` (a MERGE's tag).
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
#: The write option that sets a DataFrame write's commit `userMetadata` (an overwrite's tag): no
#: session conf to set before and unset after.
USER_METADATA_OPTION = "userMetadata"
#: The error condition of that check: a row outside the window.
REPLACE_WHERE_MISMATCH = "DELTA_REPLACE_WHERE_MISMATCH"
#: Conflicts of Delta's optimistic concurrency: another commit touched what this one read.
CONCURRENT = ("DELTA_CONCURRENT", "ConcurrentAppendException", "ConcurrentDeleteReadException")
#: How many commits back the table's history is searched for a tag.
HISTORY_DEPTH = 100
#: The commits searched first: this statement's is nearly always the newest.
RECENT_DEPTH = 5
#: The session conf Delta sets to the version of the session's last commit (each Spark Connect
#: session, so each operator call, has its own).
LAST_COMMIT_VERSION = "spark.databricks.delta.lastCommitVersionInSession"
#: How a commit's JSON file in the table's log starts its `commitInfo` action (Delta writes one
#: compact JSON object a line).
COMMIT_INFO_PREFIX = '{"commitInfo"'


def is_delta(info: SparkTableInfo) -> bool:
    return info.provider == DELTA


def commit_tag(attempt: str, window: str) -> str:
    """The commit's user metadata: the attempt's identity, the window and a nonce (one per
    statement), as JSON, so a search of the history finds exactly this statement's commit."""
    return json.dumps(
        {"airflow_idempotent": {"attempt": attempt, "window": window, "nonce": uuid.uuid4().hex}},
        sort_keys=True,
    )


@dataclass(frozen=True)
class Commit:
    """One commit of a Delta table, as DESCRIBE HISTORY shows it."""

    version: int
    read_version: int | None
    operation: str
    metrics: Mapping[str, str]
    user_metadata: str | None

    def metric(self, name: str) -> int:
        return int(self.metrics.get(name) or 0)


def history(
    conn: SparkConnection, adapter: SparkAdapter, table: str, depth: int = HISTORY_DEPTH
) -> list[Commit]:
    """The table's last `depth` commits, newest first."""
    rows = conn.session.sql(f"DESCRIBE HISTORY {adapter.qualified(table)} LIMIT {int(depth)}").collect()
    return [
        Commit(
            version=int(r["version"]),
            read_version=None if r["readVersion"] is None else int(r["readVersion"]),
            operation=str(r["operation"]),
            metrics=dict(r["operationMetrics"] or {}),
            user_metadata=r["userMetadata"],
        )
        for r in rows
    ]


def tagged_commits(
    conn: SparkConnection, adapter: SparkAdapter, table: str, attempt_prefix: str
) -> list[Commit]:
    """The recent commits whose tag names an attempt starting with `attempt_prefix` (newest first):
    what a rerun asks to know whether an earlier try's commit landed."""
    found = []
    for commit in history(conn, adapter, table):
        try:
            tag = json.loads(commit.user_metadata or "")["airflow_idempotent"]
        except (ValueError, TypeError, KeyError):
            continue
        if str(tag.get("attempt", "")).startswith(attempt_prefix):
            found.append(commit)
    return found


def session_commit(conn: SparkConnection, location: str, tag: str) -> Commit | None:
    """The session's last commit, read from its JSON file in the table's log at `location`, when
    it carries `tag` (so it is this statement's commit of this table); None when it does not or
    cannot be read (no commit in the session, a log whose commits are not plain files): the
    history is searched then. One small text read (65-190 ms measured) against DESCRIBE HISTORY's
    300-500 ms (bench/probe_delta_commit.py): the latter is a job over the log too, with the
    history's rows built and sent."""
    try:
        version = int(conn.session.conf.get(LAST_COMMIT_VERSION) or "")
        path = f"{location.rstrip('/')}/_delta_log/{version:020d}.json"
        frame = conn.session.read.text(path)
        lines = frame.where(frame["value"].startswith(COMMIT_INFO_PREFIX)).collect()
    except Exception as err:  # any failure: the history search decides
        log.debug("the session's last Delta commit was not read from the log: %s", err)
        return None
    for (line,) in lines:
        info = json.loads(line)["commitInfo"]
        if info.get("userMetadata") != tag:
            return None
        read_version = info.get("readVersion")
        return Commit(
            version=version,
            read_version=None if read_version is None else int(read_version),
            operation=str(info.get("operation")),
            metrics=dict(info.get("operationMetrics") or {}),
            user_metadata=tag,
        )
    return None


def commit_of(
    conn: SparkConnection, adapter: SparkAdapter, table: str, tag: str, location: str = ""
) -> Commit:
    """The commit this statement made, found by its tag: the session's last commit read from the
    table's log at `location` first (`session_commit`), else among the last few commits of the
    history (each commit searched is a JSON file read), the last HISTORY_DEPTH when others landed
    since."""
    if location:
        found = session_commit(conn, location, tag)
        if found is not None:
            return found
    for depth in (RECENT_DEPTH, HISTORY_DEPTH):
        for commit in history(conn, adapter, table, depth):
            if commit.user_metadata == tag:
                return commit
    raise SchemaError(
        f"the commit of this write is not among the last {HISTORY_DEPTH} commits of {table}: more than "
        f"{HISTORY_DEPTH} commits landed since; its count and checksum cannot be read from its version."
    )


@contextlib.contextmanager
def tagged(conn: SparkConnection, tag: str) -> Iterator[None]:
    """The session's next commits carry `tag`; unset after. For a SQL statement (MERGE INTO),
    which takes no write options; an overwrite passes its tag as the write's `userMetadata` option
    (`overwrite`). REPLACE WHERE's row check (`CONSTRAINT_CHECK`) is on in every session the
    provider opens (`adapter.open_session`), not set per write."""
    conf = conn.session.conf
    conf.set(USER_METADATA, tag)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            conf.unset(USER_METADATA)


def at_version(select: exp.Select, version: int) -> exp.Select:
    """`select` (over one table) reading the table as of `version` (Delta's time travel)."""
    out = select.copy()
    table = out.find(exp.Table)
    assert table is not None
    table.set("version", as_of(version))
    return out


def as_of(version: int) -> exp.Version:
    """``VERSION AS OF <version>``: time travel to a Delta version or an Iceberg snapshot id."""
    return exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(version))


def check_delta(adapter: SparkAdapter, info: SparkTableInfo) -> None:
    if not is_delta(info):
        raise SchemaError(f"{info.qualified} is a {info.provider or 'non-Delta'} table, not a Delta table.")


def pinned(select: exp.Select, table: str, version: int) -> exp.Select:
    """`select` reading `table` (wherever it appears, other tables untouched) as of `version`: a
    Delta version or an Iceberg snapshot id (the guard's replay diffs against the first write's)."""
    out = select.copy()
    name = table_parts(table)[2].lower()
    for node in out.find_all(exp.Table):
        if node.name.lower() == name:
            node.set("version", as_of(version))
    return out


def merge_into(
    adapter: SparkAdapter,
    spec: WriteSpec,
    columns: Sequence[str],
    keys: Sequence[str],
    delete_missing: bool,
    changed_only: bool = False,
) -> str:
    """MERGE INTO t USING (query, its refusals folded in: `folded_source`) ON keys [AND <window on
    t>]: update matched rows (with
    `changed_only`, those whose values differ, NULL-safe: a reconcile touches only what changed),
    insert the rest, and with `delete_missing` delete the window's rows the source lacks."""
    target = adapter.table(spec.table, TARGET_ALIAS)
    on: exp.Expr = exp.and_(
        *[
            exp.EQ(this=adapter.column(k, TARGET_ALIAS), expression=adapter.column(k, SOURCE_ALIAS))
            for k in keys
        ]
    )
    window = None
    if spec.partition_column is not None:
        window = adapter.in_window(spec.partition_column, TARGET_ALIAS)
        on = exp.and_(on, window.copy())
    settable = [c for c in columns if c.lower() not in {k.lower() for k in keys}]
    sets = ", ".join(
        f"{adapter.ident(c)} = {adapter.render(adapter.column(c, SOURCE_ALIAS))}" for c in settable
    )
    names = ", ".join(adapter.ident(c) for c in columns)
    values = ", ".join(adapter.render(adapter.column(c, SOURCE_ALIAS)) for c in columns)
    source = folded_source(adapter, spec, columns, keys)
    parts = [f"MERGE INTO {adapter.render(target)} USING {adapter.render(source)} ON {adapter.render(on)}"]
    if sets and changed_only:
        same = exp.and_(
            *[
                exp.NullSafeEQ(
                    this=adapter.column(c, TARGET_ALIAS), expression=adapter.column(c, SOURCE_ALIAS)
                )
                for c in settable
            ]
        )
        parts.append(f"WHEN MATCHED AND NOT ({adapter.render(same)}) THEN UPDATE SET {sets}")
    elif sets:
        parts.append(f"WHEN MATCHED THEN UPDATE SET {sets}")
    parts.append(f"WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({values})")
    if delete_missing:
        assert window is not None
        parts.append(f"WHEN NOT MATCHED BY SOURCE AND {adapter.render(window)} THEN DELETE")
    return " ".join(parts)


def _commit(
    conn: SparkConnection, statement: str, params: Mapping[str, Any], tag: str, timeout: float
) -> None:
    """Run the committing statement, tagged; a conflict with a concurrent commit (Delta's optimistic
    concurrency) is retried until `timeout`, as a lock wait would be."""

    def run() -> None:
        with tagged(conn, tag):
            conn.sql(statement, params)

    retry_conflicts(run, CONCURRENT, "the Delta commit", timeout)


def window_stats(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    info: SparkTableInfo,
    version: int,
    read_version: int | None,
    window_only: Mapping[str, Any],
    replaced_rows: Callable[[int], int] | None = None,
    observed: Observed | None = None,
) -> tuple[int, str | None, int]:
    """The window's rows and checksum at the commit's `version`, and its rows at the version the
    commit read (`read_version`: what it replaced), both by time travel (``VERSION AS OF``: a Delta
    version or an Iceberg snapshot id), never a later state. `replaced_rows` (the window's new row
    count -> the rows it replaced), when the commit's own metrics say it, saves the second scan;
    `observed` (the rows the commit wrote, `observed.trusted`) saves the first."""
    assert spec.partition_column is not None
    if observed is not None:
        count = observed.rows
        checksum: str | None = adapter.checksum_text(count, observed.total) if spec.checksum else None
    elif spec.checksum:
        query = adapter.window_checksum(spec.table, spec.partition_column, list(info.columns.values()))
        count, total = adapter.execute(conn, at_version(query, version), window_only).one()
        checksum = adapter.checksum_text(int(count), total)
    else:
        query = adapter.count_window(spec.table, spec.partition_column)
        count = adapter.execute(conn, at_version(query, version), window_only).scalar_one()
        checksum = None
    before = 0 if replaced_rows is None else replaced_rows(int(count))
    if read_version is not None and replaced_rows is None:
        counting = at_version(adapter.count_window(spec.table, spec.partition_column), read_version)
        before = int(adapter.execute(conn, counting, window_only).scalar_one())
    return int(count), checksum, before


def period_stats(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    info: SparkTableInfo,
    version: int,
    read_version: int | None,
) -> tuple[PeriodResult, ...]:
    """With lookback, each covered period's rows and checksum at the commit's `version` and its
    rows at `read_version` (what the commit replaced there), by the same queries as a window
    written alone, so a period written with lookback compares with one written alone. Empty
    without lookback. The one commit covers them all; history records each (`record_periods`)."""
    if not spec.periods or spec.partition_column is None:
        return ()
    out = []
    for period in spec.periods:
        binds = period_binds(adapter, info, spec, period)
        count, checksum, before = window_stats(adapter, conn, spec, info, version, read_version, binds)
        out.append(PeriodResult(period, before, count, checksum))
    return tuple(out)


@dataclass(frozen=True)
class DeltaResult(WriteResult):
    """A write's result with the Delta version of its commit."""

    table_version: int | None = None


def earlier_commits(conn: SparkConnection, adapter: SparkAdapter, spec: WriteSpec) -> None:
    """On a retry, log the commits earlier tries of this task made in this run (by their tags): a
    try that died after its commit landed shows here, and this try replaces the window again."""
    head, _, try_part = spec.attempt.rpartition("/try-")
    if not head or try_part == "1":
        return
    for commit in tagged_commits(conn, adapter, spec.table, f"{head}/try-"):
        log.warning(
            "an earlier try of this task committed %s as Delta version %d", spec.table, commit.version
        )


def overwrite(
    adapter: SparkAdapter, conn: SparkConnection, spec: WriteSpec, described: SparkTableInfo | None = None
) -> DeltaResult:
    """Replace the window of a Delta table by the SELECT's rows in one REPLACE WHERE commit."""
    if spec.partition_column is None:
        raise SchemaError("partition overwrite needs a partition_column: the column the window selects.")
    info, columns, params = prepare(adapter, conn, spec, described)  # type: ignore[arg-type]
    assert isinstance(info, SparkTableInfo)
    check_delta(adapter, info)
    step("prepared")
    if spec.before_commit is not None:
        spec.before_commit()  # the statement is the commit: the kill switch's last word is now
    earlier_commits(conn, adapter, spec)
    tag = commit_tag(spec.attempt or uuid.uuid4().hex, spec.window.label())
    step("checked")
    binds = adapter.bindable(params)
    select = adapter.render(adapter.typed_rows(info, list(info.columns), spec.query, produced=columns))
    predicate = adapter.render(adapter.in_window(spec.partition_column))
    aggregates = []
    if observable(info):
        aggregates = window_aggregates(adapter, info, spec.table, spec.partition_column, spec.checksum)

    # the tag as the write's own option: no session conf; REPLACE WHERE's row check is on in every
    # session the provider opens (`CONSTRAINT_CHECK` in `adapter.SESSION_CONF`)
    options = {USER_METADATA_OPTION: tag}

    def run() -> Observed | None:  # REPLACE WHERE's plan, the rows counted as they are written
        return write_observed(conn, adapter, spec.table, select, predicate, binds, aggregates, options)

    try:
        observed = retry_conflicts(run, CONCURRENT, "the Delta commit", spec.lock_timeout)
    except Exception as err:
        if REPLACE_WHERE_MISMATCH in str(err):  # refused by Delta, nothing committed: name the rows
            raise_outside(adapter, conn, spec, params)  # type: ignore[arg-type]
        raise
    step("committed")
    commit = commit_of(conn, adapter, spec.table, tag, info.location)
    deleted = commit.metrics.get("numDeletedRows")  # what REPLACE WHERE removed (Delta 2.x and later)
    return replaced(
        adapter,
        conn,
        spec,
        info,
        params,
        commit.version,
        commit.read_version,
        "Delta commit",
        None if deleted is None else lambda _: int(deleted),
        trusted(observed, written_rows(commit), f"Delta commit {commit.version}"),
    )


def written_rows(commit: Commit) -> int | None:
    """The rows a REPLACE WHERE commit added to its window, by its metrics: those it wrote less
    those copied back from files only partly in the window (None when the metrics do not say)."""
    if "numOutputRows" not in commit.metrics:
        return None
    return commit.metric("numOutputRows") - commit.metric("numCopiedRows")


def replaced(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    info: SparkTableInfo,
    params: Mapping[str, Any],
    version: int,
    read_version: int | None,
    what: str,
    replaced_rows: Callable[[int], int] | None = None,
    observed: Observed | None = None,
) -> DeltaResult:
    """The result of a window replaced by one commit of the table format (`version`: a Delta
    version or an Iceberg snapshot id, `read_version` the one it replaced), its figures read at
    that commit and logged (`what` names the commit's kind; `replaced_rows` as the commit's
    metrics give it, else counted at `read_version`; `observed`: the window's figures as the
    commit wrote them, when trusted, else read at `version`)."""
    binds = window_binds(params)
    row_count, checksum, before = window_stats(
        adapter, conn, spec, info, version, read_version, binds, replaced_rows, observed
    )
    periods = period_stats(adapter, conn, spec, info, version, read_version)
    step("counted")
    log.info(
        "replaced %s window %s in %s %d: %d rows by %d",
        spec.table,
        spec.window.label(),
        what,
        version,
        before,
        row_count,
    )
    return DeltaResult(
        "overwrite",
        spec.table,
        spec.window.label(),
        before,
        row_count,
        0,
        row_count,
        row_count if spec.checksum else None,
        checksum,
        periods=periods,
        table_version=version,
    )


def merge(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    keys: Sequence[str],
    delete_missing: bool,
    changed_only: bool = False,
    info: SparkTableInfo | None = None,
) -> DeltaResult:
    """Upsert the SELECT's rows into a Delta table on `keys` in one MERGE INTO commit."""
    info, columns, params, key_names = checked_merge_source(
        adapter, conn, spec, keys, delete_missing, lambda found: check_delta(adapter, found), info
    )
    step("prepared")
    if spec.before_commit is not None:
        spec.before_commit()
    earlier_commits(conn, adapter, spec)
    tag = commit_tag(spec.attempt or uuid.uuid4().hex, spec.window.label())
    statement = merge_into(adapter, spec, columns, key_names, delete_missing, changed_only)
    step("checked")
    with refusals_named(adapter, conn, spec, info, key_names, params):
        _commit(conn, statement, adapter.bindable(params), tag, spec.lock_timeout)
    step("committed")
    commit = commit_of(conn, adapter, spec.table, tag, info.location)
    deleted, inserted, updated = (
        commit.metric(f"numTargetRows{k}") for k in ("Deleted", "Inserted", "Updated")
    )
    return merged(
        adapter,
        conn,
        spec,
        info,
        params,
        key_names,
        commit.version,
        commit.read_version,
        "Delta commit",
        (deleted, inserted, updated, commit.metric("numSourceRows")),
    )


def merged(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    info: SparkTableInfo,
    params: Mapping[str, object],
    key_names: Sequence[str],
    version: int,
    read_version: int | None,
    what: str,
    changed: tuple[int, int, int, int],
) -> DeltaResult:
    """The result of a window merged by one commit of the table format (`version`: a Delta version
    or an Iceberg snapshot id, `read_version` the one it merged into), from the commit's own
    metrics (`changed`: rows deleted, inserted, updated, and the source's rows), with the window's
    count and checksum read at `version` (none without a checksum: no scan at all), and logged."""
    row_count: int | None = None
    checksum: str | None = None
    if spec.partition_column is not None and spec.checksum:
        # the merge's own metrics say what it changed: no count at the version it read (None)
        binds = window_binds(params)
        row_count, checksum, _ = window_stats(adapter, conn, spec, info, version, None, binds)
    periods = period_stats(adapter, conn, spec, info, version, read_version)
    step("counted")
    deleted, inserted, updated, source_rows = changed
    result = DeltaResult(
        "merge",
        spec.table,
        spec.window.label(),
        deleted,
        inserted,
        updated,
        source_rows,
        row_count,
        checksum,
        periods=periods,
        table_version=version,
    )
    log.info(
        "merged %s window %s on %s in %s %d: %d source rows, %d inserted, %d updated, %d deleted",
        spec.table,
        spec.window.label(),
        key_names,
        what,
        version,
        result.source_rows,
        result.rows_inserted,
        result.rows_updated,
        result.rows_deleted,
    )
    return result

"""Apache Iceberg tables on Spark: each window written by ONE snapshot of the table's own.

Iceberg's plain forms do not keep the contract (measured in docs/engines.md): a dynamic
``INSERT OVERWRITE`` leaves the days its SELECT no longer produces and commits nothing for an
empty result; ``REPLACE WHERE`` (an overwrite by filter) deletes the window's rows but takes rows
outside it unchecked; DELETE then INSERT is two snapshots.

- Overwrite: ``INSERT INTO t WITH (isolation-level, validate-from-snapshot-id) REPLACE WHERE
  <window> SELECT ..``'s plan (``writeTo(t)`` with those options, ``.overwrite(<window>)``): one
  snapshot deletes the window's rows and adds the SELECT's. The partition column of every row passes
  through ``CASE WHEN <in window> THEN p ELSE raise_error(..) END``, so a row outside the window (or
  NULL) fails the statement in the cluster before the commit, and the provider then names those rows
  as on the SQL engines (`strategies.raise_outside`). An empty SELECT commits a snapshot that
  empties the window; a month is replaced whole.
  Serializable isolation from the snapshot the session's catalog holds (Spark's Iceberg catalog
  caches a table's metadata per session, 30 s by default; the first try takes the copy this call's
  `describe` loaded, a retry REFRESHes first): a concurrent commit that added files to this window
  fails the commit (Iceberg's ValidationException), one to another window does not, and the
  statement is retried within the lock timeout (`retry.retry_conflicts`). Validating from an older
  snapshot checks more commits, never fewer, so the first try's REFRESH (a round trip) is not needed.
- Merge: ``MERGE INTO`` (the builder Delta's merge uses), its source refusing in the statement
  what Delta's refuses (repeated or NULL keys, rows outside the window, keys held in another
  window: `spark.merges.folded_source`), then named (`spark.merges.refusals_named`):
  Iceberg's MERGE is serializable by default and fails a source row matching twice, but inserts
  a repeated key that matches nothing twice, like Delta.

Each snapshot carries the attempt's identity (`delta.commit_tag`) in its summary (an overwrite's
write option ``snapshot-property.<key>``, a MERGE's session conf
``spark.sql.iceberg.snapshot-property.<key>``), so the snapshot is found by its tag, not as the
latest; its id goes with the result (history records it), and the window's count and checksum are
an overwrite's rows as written (`observed`, when the summary's added records agree), else read
``VERSION AS OF`` that id, what it replaced from the summary or ``VERSION AS OF`` its parent; the result is
Delta's (`delta.DeltaResult`), its `table_version` the snapshot id.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from sqlglot import exp

from airflow_idempotent.adapters.base import SOURCE_ALIAS
from airflow_idempotent.errors import SchemaError
from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkTableInfo, raise_error
from airflow_idempotent.spark.delta import (
    DeltaResult,
    commit_tag,
    merge_into,
    merged,
    replaced,
)
from airflow_idempotent.spark.merges import checked_merge_source, refusals_named
from airflow_idempotent.spark.observed import Observed, observable, trusted, window_aggregates, write_observed
from airflow_idempotent.spark.partitioning import PARTLY_MATCHED, describe_partitioning, window_fit
from airflow_idempotent.spark.retry import retry_conflicts
from airflow_idempotent.spark.steps import step
from airflow_idempotent.strategies import prepare, raise_outside
from airflow_idempotent.write_spec import WriteSpec

log = logging.getLogger(__name__)

#: The catalog's provider of an Iceberg table (DESCRIBE TABLE EXTENDED's "Provider").
ICEBERG = "iceberg"
#: The snapshot-summary key of the attempt's tag, the session conf that sets it (a MERGE's tag),
#: and the write option that sets it (an overwrite's: no session conf to set and unset).
TAG_KEY = "airflow-idempotent"
TAG_CONF = f"spark.sql.iceberg.snapshot-property.{TAG_KEY}"
TAG_OPTION = f"snapshot-property.{TAG_KEY}"
#: The text of the statement's own refusal of a row outside the window (raise_error).
OUTSIDE = "airflow_idempotent: a row of the SELECT is outside the window"
#: Iceberg's refusals of a commit that lost a race with a concurrent one (nothing committed).
CONFLICTS = ("Found conflicting files", "Found new conflicting", "CommitFailedException")
#: The property of Iceberg's Spark table naming its current snapshot ("none" before the first).
SNAPSHOT_PROPERTY = "current-snapshot-id"
#: How many snapshots back the table's history is searched for a tag.
HISTORY_DEPTH = 100


def is_iceberg(info: SparkTableInfo) -> bool:
    return info.provider == ICEBERG


@dataclass(frozen=True)
class Snapshot:
    """One snapshot of an Iceberg table, as its `snapshots` metadata table shows it."""

    snapshot_id: int
    parent_id: int | None
    operation: str
    summary: Mapping[str, str]

    def metric(self, name: str) -> int:
        return int(self.summary.get(name) or 0)

    @property
    def tag(self) -> str | None:
        return self.summary.get(TAG_KEY)

    def merged(self) -> tuple[int, int, int]:
        """The rows a MERGE snapshot deleted, inserted and updated, by its summary. An insert-only
        MERGE (every column a key: no UPDATE) is rewritten by Iceberg to an append, whose summary
        has no merge metrics: its added records are the rows it inserted."""
        prefix = "spark.merge-into.num-target-rows-"
        if prefix + "inserted" not in self.summary and self.operation == "append":
            return 0, self.metric("added-records"), 0
        deleted, inserted, updated = (self.metric(prefix + k) for k in ("deleted", "inserted", "updated"))
        return deleted, inserted, updated

    def added_rows(self) -> int | None:
        """The rows an overwrite snapshot added, by its summary; None when it added delete files
        (their rows are not among the added records)."""
        if self.metric("added-delete-files") or "added-records" not in self.summary:
            return None
        return self.metric("added-records")

    def replaced_rows(self) -> Callable[[int], int] | None:
        """The window's rows an overwrite snapshot removed, from its summary, given the window's new
        rows: the removed files' records less those copied back (a file only partly in the window
        is rewritten, its other rows added again): deleted - added + new. None (count them) when
        the snapshot added delete files, whose rows the summary does not split this way."""
        if self.metric("added-delete-files"):
            return None
        deleted, added = self.metric("deleted-records"), self.metric("added-records")
        return lambda new: deleted - added + new


def metadata_table(adapter: SparkAdapter, table: str, which: str) -> str:
    """`catalog`.`db`.`t`.`which`: one of the table's metadata tables (snapshots, refs)."""
    return f"{adapter.qualified(table)}.{adapter.ident(which)}"


def current_snapshot(conn: SparkConnection, adapter: SparkAdapter, table: str) -> int | None:
    """The snapshot the table's main branch points at (None for a table never written), as the
    catalog's table shows it (its ``current-snapshot-id`` property, read in the driver: the `refs`
    metadata table, read when the property is not there, is a Spark job of 0.3 s)."""
    prop = adapter.literal(SNAPSHOT_PROPERTY)
    rows = conn.sql(f"SHOW TBLPROPERTIES {adapter.qualified(table)} ({prop})").all()
    value = str(rows[0][1]).strip() if rows else ""
    if value.lstrip("-").isdigit():
        return int(value)
    if value == "none":
        return None
    rows = conn.sql(
        f"SELECT snapshot_id FROM {metadata_table(adapter, table, 'refs')} WHERE name = 'main'"
    ).all()
    return int(rows[0][0]) if rows else None


def snapshots(
    conn: SparkConnection, adapter: SparkAdapter, table: str, depth: int = HISTORY_DEPTH
) -> list[Snapshot]:
    """The table's last `depth` snapshots, newest first."""
    rows = conn.session.sql(
        "SELECT snapshot_id, parent_id, operation, summary "
        f"FROM {metadata_table(adapter, table, 'snapshots')} ORDER BY committed_at DESC LIMIT {int(depth)}"
    ).collect()
    return [
        Snapshot(
            snapshot_id=int(r["snapshot_id"]),
            parent_id=None if r["parent_id"] is None else int(r["parent_id"]),
            operation=str(r["operation"]),
            summary=dict(r["summary"] or {}),
        )
        for r in rows
    ]


def snapshot_of(conn: SparkConnection, adapter: SparkAdapter, table: str, tag: str) -> Snapshot:
    """The snapshot this statement committed, found by its tag."""
    for snapshot in snapshots(conn, adapter, table):
        if snapshot.tag == tag:
            return snapshot
    raise SchemaError(
        f"the snapshot of this write is not among the last {HISTORY_DEPTH} snapshots of {table}: more "
        f"than {HISTORY_DEPTH} commits landed since; its count and checksum cannot be read from it."
    )


def earlier_snapshots(conn: SparkConnection, adapter: SparkAdapter, spec: WriteSpec) -> None:
    """On a retry, log the snapshots earlier tries of this task committed (by their tags): a try
    that died after its commit landed shows here, and this try replaces the window again."""
    head, _, try_part = spec.attempt.rpartition("/try-")
    if not head or try_part == "1":
        return
    for snapshot in snapshots(conn, adapter, spec.table):
        try:
            attempt = str(json.loads(snapshot.tag or "")["airflow_idempotent"]["attempt"])
        except (ValueError, TypeError, KeyError):
            continue
        if attempt.startswith(f"{head}/try-"):
            log.warning(
                "an earlier try of this task committed %s as Iceberg snapshot %d",
                spec.table,
                snapshot.snapshot_id,
            )


@contextlib.contextmanager
def tagged(conn: SparkConnection, tag: str) -> Iterator[None]:
    """The session's next snapshots carry `tag` in their summary; unset after. For a SQL statement
    (MERGE INTO), which takes no write options; an overwrite passes `TAG_OPTION` (`write_options`)."""
    conf = conn.session.conf
    conf.set(TAG_CONF, tag)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            conf.unset(TAG_CONF)


def check_iceberg(info: SparkTableInfo) -> None:
    if not is_iceberg(info):
        kind = info.provider or "non-Iceberg"
        raise SchemaError(f"{info.qualified} is a {kind} table, not an Iceberg table.")


def checked_rows(
    adapter: SparkAdapter, info: SparkTableInfo, columns: Sequence[str], spec: WriteSpec
) -> exp.Select:
    """SELECT <every column of t, in t's order, cast to t's types> FROM (query), the partition
    column through CASE WHEN <in window> THEN .. ELSE raise_error(..) END: a row outside the window
    fails the statement in the cluster, before anything is committed."""
    assert spec.partition_column is not None
    types = info.spark_types or {}
    produced = {c.lower() for c in columns}
    part = spec.partition_column.lower()
    projections = []
    for col in info.columns.values():
        kind = exp.DataType.build(types[col.name.lower()], dialect="spark")
        value: exp.Expr = exp.null()
        if col.name.lower() in produced:
            value = adapter.column(col.name, SOURCE_ALIAS)
        if col.name.lower() == part:
            refuse = raise_error(OUTSIDE)
            inside = adapter.in_window(col.name, SOURCE_ALIAS)
            value = exp.Case(ifs=[exp.If(this=inside, true=value)], default=refuse)
        projections.append(exp.alias_(exp.cast(value, kind), exp.to_identifier(col.name, quoted=True)))
    return exp.select(*projections).from_(adapter.source(spec.query))


def check_fit(info: SparkTableInfo, spec: WriteSpec, params: Mapping[str, object]) -> None:
    """Refuse, before anything is written, a window whose bounds cut the periods of the time
    transform the table is partitioned by (a day of a ``months(d)`` table): Iceberg overwrites
    whole data files, and a file holding the whole month cannot be removed for one day of it
    (`spark.partitioning`)."""
    assert spec.partition_column is not None
    start, end = params["window_start"], params["window_end"]
    assert isinstance(start, (date, datetime)) and isinstance(end, (date, datetime))
    fit = window_fit(info.partitioning, spec.partition_column, start, end)
    if fit.verdict != "cuts":
        return
    raise SchemaError(
        f"cannot overwrite the window {spec.window.label()} of {info.qualified}: the table is partitioned "
        f"by {describe_partitioning(info.partitioning)}, so each data file holds whole {fit.unit}s of "
        f"{spec.partition_column}, and the window is not whole {fit.unit}s; Iceberg overwrites whole "
        f"files only (it would refuse the commit: {PARTLY_MATCHED}). Nothing was written. Declare the "
        f"operator's windows as whole {fit.unit}s (granularity='{fit.unit}'), or partition the table "
        f"by {spec.partition_column} or a finer transform of it (e.g. days({spec.partition_column})), or "
        "write the window with the MergeOperator (delete_missing=True), which rewrites the files it "
        "touches (copy-on-write) in one snapshot."
    )


def cut_files(info: SparkTableInfo, spec: WriteSpec, err: Exception) -> SchemaError:
    """Iceberg's refusal of an overwrite whose window cuts a data file (nothing committed; its
    new files removed by the write's abort), as the user's error: table, window, partitioning,
    the file, what to do."""
    file = str(err).split(PARTLY_MATCHED, 1)[1].split("\n", 1)[0].split(": ", 1)[-1].strip()
    return SchemaError(
        f"cannot overwrite the window {spec.window.label()} of {info.qualified}: the table is partitioned "
        f"by {describe_partitioning(info.partitioning)}, and a data file holds rows both inside and "
        f"outside the window ({file}); Iceberg overwrites whole files only and refused the commit "
        f"({PARTLY_MATCHED}). Nothing was committed. Partition the table by {spec.partition_column} or "
        f"a time transform of it the windows do not cut (e.g. days({spec.partition_column})) and "
        "rewrite its files (CALL <catalog>.system.rewrite_data_files), or write the window with the "
        "MergeOperator (delete_missing=True), which rewrites the files it touches (copy-on-write) in "
        "one snapshot."
    )


def write_options(read_snapshot: int | None, tag: str) -> dict[str, str]:
    """The overwrite's write options: serializable isolation, validated from the snapshot it read,
    and the attempt's `tag` in the snapshot's summary."""
    options = {"isolation-level": "serializable", TAG_OPTION: tag}
    if read_snapshot is not None:
        options["validate-from-snapshot-id"] = str(int(read_snapshot))
    return options


def overwrite(
    adapter: SparkAdapter, conn: SparkConnection, spec: WriteSpec, described: SparkTableInfo | None = None
) -> DeltaResult:
    """Replace the window of an Iceberg table by the SELECT's rows in one snapshot."""
    if spec.partition_column is None:
        raise SchemaError("partition overwrite needs a partition_column: the column the window selects.")
    info, columns, params = prepare(adapter, conn, spec, described)  # type: ignore[arg-type]
    assert isinstance(info, SparkTableInfo)
    check_iceberg(info)
    check_fit(info, spec, params)
    step("prepared")
    if spec.before_commit is not None:
        spec.before_commit()  # the statement is the commit: the kill switch's last word is now
    earlier_snapshots(conn, adapter, spec)
    tag = commit_tag(spec.attempt or uuid.uuid4().hex, spec.window.label())

    binds = adapter.bindable(params)
    select = adapter.render(checked_rows(adapter, info, columns, spec))
    predicate = adapter.render(adapter.in_window(spec.partition_column))
    aggregates = []
    if observable(info):
        aggregates = window_aggregates(adapter, info, spec.table, spec.partition_column, spec.checksum)

    tries = itertools.count()

    def run() -> Observed | None:  # the snapshot validated from is read again on each try
        if next(tries):  # a retry reads past the session catalog's cache (the module's docstring)
            conn.sql(adapter.refresh(spec.table))
        options = write_options(current_snapshot(conn, adapter, spec.table), tag)
        return write_observed(conn, adapter, spec.table, select, predicate, binds, aggregates, options)

    step("checked")
    try:
        observed = retry_conflicts(run, CONFLICTS, "the Iceberg commit", spec.lock_timeout)
    except Exception as err:
        if OUTSIDE in str(err):  # refused in the statement, nothing committed: name the rows
            raise_outside(adapter, conn, spec, params)  # type: ignore[arg-type]
        if PARTLY_MATCHED in str(err):
            raise cut_files(info, spec, err) from None
        raise
    step("committed")
    snap = snapshot_of(conn, adapter, spec.table, tag)
    return replaced(
        adapter,
        conn,
        spec,
        info,
        params,
        snap.snapshot_id,
        snap.parent_id,
        "Iceberg snapshot",
        snap.replaced_rows(),
        trusted(observed, snap.added_rows(), f"Iceberg snapshot {snap.snapshot_id}"),
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
    """Upsert the SELECT's rows into an Iceberg table on `keys` in one MERGE INTO snapshot."""
    info, columns, params, key_names = checked_merge_source(
        adapter, conn, spec, keys, delete_missing, check_iceberg, info
    )
    step("prepared")
    if spec.before_commit is not None:
        spec.before_commit()
    earlier_snapshots(conn, adapter, spec)
    tag = commit_tag(spec.attempt or uuid.uuid4().hex, spec.window.label())
    statement = merge_into(adapter, spec, columns, key_names, delete_missing, changed_only)
    binds = adapter.bindable(params)

    tries = itertools.count()

    def run() -> None:
        if next(tries):  # a retry merges into the table as it is now
            conn.sql(adapter.refresh(spec.table))
        with tagged(conn, tag):
            conn.sql(statement, binds)

    step("checked")
    with refusals_named(adapter, conn, spec, info, key_names, params):
        retry_conflicts(run, CONFLICTS, "the Iceberg commit", spec.lock_timeout)
    step("committed")
    snapshot = snapshot_of(conn, adapter, spec.table, tag)
    deleted, inserted, updated = snapshot.merged()
    # the keys are unique (the MERGE refused its source otherwise): each source row inserted or
    # updated one row
    changed = (deleted, inserted, updated, inserted + updated)
    return merged(
        adapter,
        conn,
        spec,
        info,
        params,
        key_names,
        snapshot.snapshot_id,
        snapshot.parent_id,
        "Iceberg snapshot",
        changed,
    )

"""What rerunning one window-write task would change: its rows staged, diffed with production, dropped.

One read-only transaction that is always rolled back: the target's window is checksummed, the
task's SELECT (rendered as the run renders it) goes into a TEMPORARY staging table typed like the
target (on Spark, which has no transaction, a cached temporary view of the session), the guard's
diff (`guard.diff.diff_window`) compares it with production by key, a few keys of each kind are
sampled, and the staging is dropped. Nothing is written to the target, the history store or
Airflow: no row passes through Python, and the target stays byte-identical.

Cost (issue 32: within 1.5x of the write it previews, bench/bench_preview.py): each side is
scanned once for its checksum and measure sums together, the staged keys are counted in one pass
(named by `check_keys` only when something is wrong), the diff gets those sums instead of
recounting them, and a sample kind the diff counted none of is answered without its query.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection
from sqlglot import exp

from airflow_idempotent.adapters.base import EngineAdapter, TableInfo
from airflow_idempotent.guard.config import Thresholds
from airflow_idempotent.guard.diff import WindowDiff, diff_window, empty_kinds, key_sample, plain_key
from airflow_idempotent.guard.write import sql_true, staging_name
from airflow_idempotent.strategies import check_keys, prepare, window_binds
from airflow_idempotent.write_spec import WriteSpec

_NUMERIC = re.compile(r"NUMERIC|DECIMAL|INT|REAL|DOUBLE|FLOAT|MONEY|NUMBER", re.IGNORECASE)


@dataclass(frozen=True)
class WritePreview:
    """One task's window, as production holds it and as a rerun would write it."""

    table: str
    window: str
    keys: list[str]
    measures: list[str]
    #: the guard's diff by key; None without key columns (then only counts and sums are known)
    diff: WindowDiff | None
    rows_before: int
    rows_after: int
    #: production's window and the staged rows over the same columns, by the write's checksum
    checksum_before: str
    checksum_after: str
    #: per measure: (sum before, sum after), also without keys
    measure_sums: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    #: sample keys: {"changed": [...], "added": [...], "removed": [...]}
    samples: dict[str, list[Any]] = field(default_factory=dict)
    #: the declared completeness check's answer (None when none is declared)
    source_complete: bool | None = None
    #: the stop conditions a guarded backfill would refuse on
    breaches: list[str] = field(default_factory=list)
    #: produced rows outside the window (the write would refuse them all; checked by key when keyed)
    rows_outside_window: int = 0

    @property
    def unchanged(self) -> bool:
        """The rerun would leave the window's rows exactly as they are."""
        return self.checksum_before == self.checksum_after

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "table": self.table,
            "window": self.window,
            "keys": self.keys,
            "measures": self.measures,
            "rows_before": self.rows_before,
            "rows_after": self.rows_after,
            "unchanged": self.unchanged,
            "checksum_before": self.checksum_before,
            "checksum_after": self.checksum_after,
            "source_complete": self.source_complete,
            "breaches": self.breaches,
            "rows_outside_window": self.rows_outside_window,
        }
        if self.diff is not None:
            out["diff"] = self.diff.to_json()
        else:
            out["diff"] = None
            out["measure_sums"] = {
                m: {"before": str(before), "after": str(after)}
                for m, (before, after) in self.measure_sums.items()
            }
        out["samples"] = {kind: [plain_key(k) for k in keys] for kind, keys in self.samples.items()}
        return out


def measure_columns(info: TableInfo, columns: Sequence[str], skip: Sequence[str]) -> list[str]:
    """The numeric produced columns that are no key or partition column: summed by default."""
    skipped = {s.lower() for s in skip}
    return [
        c
        for c in columns
        if c.lower() not in skipped and _NUMERIC.search(info.columns[c.lower()].type_name or "")
    ]


def _check_staged_keys(
    adapter: EngineAdapter, conn: Connection, staged: WriteSpec, keys: Sequence[str], params: dict[str, Any]
) -> None:
    """Refuse staged rows with NULL or repeated keys or outside the window, as the write would.

    Counted first in one pass (`source_profile`: rows, distinct and NULL keys, outside or not), the
    merge's own count; `check_keys`, whose GROUP BY over every key costs about 3x more (0.62 s
    against 0.18 s at 1,000,000 rows on PostgreSQL, bench/results/preview.md), runs only to name
    what the counts found. Where
    COUNT(DISTINCT) takes one column only, a multi-column key goes to `check_keys` directly.
    """
    if len(keys) == 1 or adapter.counts_distinct_tuples:
        profile = adapter.source_profile(staged.query, staged.partition_column, keys)
        rows, outside, distinct, nulls = adapter.execute(conn, profile, params).one()
        if not int(outside or 0) and not int(nulls or 0) and int(distinct or 0) == int(rows):
            return
    check_keys(adapter, conn, staged, keys, params)


def _checksum_and_sums(
    adapter: EngineAdapter,
    conn: Connection,
    table: str,
    partition: str,
    columns: Sequence[str],
    measures: Sequence[str],
    params: dict[str, Any],
) -> tuple[tuple[Any, Any], tuple[Any, ...]]:
    """`window_checksum` and `window_sums` of `table`'s window in one scan instead of two: the
    checksum's statement with the sums' expressions added, so each figure is what they compute."""
    sums = adapter.window_sums(table, None, measures).expressions[1:]
    query = adapter.window_checksum(table, partition, columns).select(*sums, copy=False)
    row = tuple(adapter.execute(conn, query, params).one())
    return (row[0], row[1]), (row[0], *row[2:])


def preview_write(
    adapter: EngineAdapter,
    spec: WriteSpec,
    keys: Sequence[str] = (),
    measures: Sequence[str] | None = None,
    completeness_sql: exp.Expr | None = None,
    thresholds: Thresholds | None = None,
) -> WritePreview:
    """Stage what a rerun of `spec` would write, compare it with production, and roll back.

    `measures` defaults to the numeric produced columns; `thresholds` (a guarded DAG's) names the
    stop conditions a corrective backfill would refuse on. Raises what the write would raise
    (SchemaError, MergeKeyError, RowsOutsideWindowError), before anything would be committed.
    """
    if spec.partition_column is None:
        raise ValueError("a window preview needs the task's partition_column")
    partition = spec.partition_column
    stage = staging_name()
    with adapter.engine.connect() as conn:
        # rolled back at the end; Spark has no transaction, and its staging is a session's cached view
        transaction = conn.begin() if adapter.supports_transactions else None
        created = False
        try:
            adapter.prepare_connection(conn)
            info, columns, params = prepare(adapter, conn, spec)
            window_only = window_binds(params)
            key_names = [info.column(k, "key column").name for k in keys]
            if measures is None:
                measures = measure_columns(info, columns, [*key_names, partition])
            measure_names = [info.column(m, "measure column").name for m in measures]

            complete: bool | None = None
            if completeness_sql is not None:
                row = adapter.execute(conn, completeness_sql, params).first()
                complete = row is not None and sql_true(row[0])

            created = True
            for statement in adapter.stage_window(stage, spec.table, info, columns, spec.query):
                adapter.execute(conn, statement, params)
            staged = dataclasses.replace(spec, query=adapter.select_columns(stage, columns))
            if key_names:
                _check_staged_keys(adapter, conn, staged, key_names, window_only)

            # each side's checksum and measure sums in one pass: COUNT(*), the checksum, the sums
            before, sums_before = _checksum_and_sums(
                adapter, conn, spec.table, partition, columns, measure_names, window_only
            )
            if key_names:  # the keys' check refused rows outside the window: the window is all of it
                after, sums_after = _checksum_and_sums(
                    adapter, conn, stage, partition, columns, measure_names, window_only
                )
            else:  # the checksum over the window, the sums over every staged row
                after = adapter.execute(
                    conn, adapter.window_checksum(stage, partition, columns), window_only
                ).one()
                sums_after = adapter.execute(conn, adapter.window_sums(stage, None, measure_names), {}).one()

            diff: WindowDiff | None = None
            samples: dict[str, list[Any]] = {}
            if key_names:
                diff = diff_window(
                    adapter,
                    conn,
                    spec,
                    stage,
                    columns,
                    key_names,
                    measure_names,
                    window_only,
                    sums=(sums_before, sums_after),
                )
                compare = [c for c in columns if c not in key_names]
                wanted = frozenset(k.lower() for k in key_names)
                unique = any(u and u <= wanted for u in info.unique_keys)
                samples = key_sample(
                    adapter, conn, spec, stage, key_names, compare, window_only, empty_kinds(diff, unique)
                )
            adapter.execute(conn, adapter.drop_staging(stage), {})
            created = False
        finally:
            if created:  # MariaDB keeps a temporary table past ROLLBACK
                with contextlib.suppress(Exception):
                    adapter.execute(conn, adapter.drop_staging(stage), {})
            if transaction is not None:
                transaction.rollback()
    return WritePreview(
        table=spec.table,
        window=spec.window.label(),
        keys=key_names,
        measures=measure_names,
        diff=diff,
        rows_before=int(sums_before[0]),
        rows_after=int(sums_after[0]),
        checksum_before=f"{int(before[0])}:{before[1]}",
        checksum_after=f"{int(after[0])}:{after[1]}",
        measure_sums={m: (sums_before[i + 1], sums_after[i + 1]) for i, m in enumerate(measure_names)},
        samples=samples,
        source_complete=complete,
        breaches=diff.breaches(thresholds) if diff is not None and thresholds is not None else [],
        rows_outside_window=int(sums_after[0]) - int(after[0]),
    )

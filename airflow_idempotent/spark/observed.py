"""A window replaced by one commit, its count and checksum taken from the rows the commit writes.

A REPLACE WHERE commit deletes every row of the window and adds only rows inside it (Delta's
constraint check, Iceberg's ``raise_error`` on the partition column refuse any other before the
commit), so the rows it writes ARE the window at its version. Counted and hashed as they pass into
the write (``DataFrame.observe``: the same job as the write, its figures returned with the command
by Spark Connect), they spare a second scan of the window at that version, 1-1.5 s of a
1,000,000-row window (bench/results/delta.md). The aggregates are `window_checksum`'s own, over
the rows already cast to the table's types, so the figure is the one a ``VERSION AS OF`` read
computes (tests/spark/test_spark_observed.py compares both).

The observation is trusted only when the commit's own metrics say it wrote as many rows
(`trusted`): a task run twice, or rows copied back from a file only partly in the window, make
them differ, and the window is then scanned at the commit's version as before.

The write is ``DataFrame.writeTo(t).overwrite(<window>)``: Spark's OverwriteByExpression, the plan
``INSERT INTO t REPLACE WHERE`` makes, by name instead of by position (the SELECT names every
column as the table does). ``DataFrameWriter``'s ``replaceWhere`` option (Delta's V1 path) returns
no observed metrics over Spark Connect 4.1.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkTableInfo, inline_params

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observed:
    """The rows a commit wrote, as they passed into the write: their count and checksum sum."""

    rows: int
    total: Any = None


def observable(info: SparkTableInfo) -> bool:
    """Whether the rows as written hash like the rows read back: not with a CHAR(n) column, which
    Spark pads when it reads (``spark.sql.readSideCharPadding``), not when it writes. The catalog
    lists such a column as a string; the schema `describe` read keeps the CHAR type."""
    return not info.padded_chars


def window_aggregates(
    adapter: SparkAdapter, info: SparkTableInfo, table: str, column: str, checksum: bool
) -> list[str]:
    """The aggregates of the window's figures, as SQL over the table's columns by name: with
    `checksum`, `window_checksum`'s own (count and the sum of row hashes), else the count."""
    if not checksum:
        return [adapter.render(exp.Count(this=exp.Star()))]
    query = adapter.window_checksum(table, column, list(info.columns.values()))
    return [adapter.render(e) for e in query.expressions]


def write_observed(
    conn: SparkConnection,
    adapter: SparkAdapter,
    table: str,
    select: str,
    predicate: str,
    params: Mapping[str, Any],
    aggregates: Sequence[str],
    options: Mapping[str, str] | None = None,
) -> Observed | None:
    """Replace the rows of `table` matching `predicate` by `select`'s rows in one write
    (``writeTo(t).overwrite(predicate)``, with the write `options`), `aggregates` observed over
    the rows written (none: nothing observed). None when Spark returned no observed figures (the
    write happened)."""
    from pyspark.sql import functions as F

    frame, figures = observed_rows(conn, select, params, aggregates)
    writer = frame.writeTo(adapter.qualified(table))
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    writer.overwrite(F.expr(inline_params(predicate, params) if params else predicate))
    got = figures()
    if got is None:
        return None
    return Observed(int(got["m0"]), got["m1"] if len(aggregates) > 1 else None)


def observed_rows(
    conn: SparkConnection, select: str, params: Mapping[str, Any], aggregates: Sequence[str]
) -> tuple[Any, Callable[[], dict[str, Any] | None]]:
    """`select`'s rows as a DataFrame with `aggregates` observed over them (none: nothing observed),
    and a function that, once the DataFrame's write has run, gives their figures by name ``m0``,
    ``m1``, .. (None when Spark returned none, or nothing was observed)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    names = [f"m{i}" for i in range(len(aggregates))]
    frame = conn.session.sql(inline_params(select, params) if params else select)
    observation = Observation(f"idem_{uuid.uuid4().hex}")
    if aggregates:
        frame = frame.observe(
            observation, *[F.expr(a).alias(n) for a, n in zip(aggregates, names, strict=True)]
        )

    def figures() -> dict[str, Any] | None:
        got = observation.get if aggregates else None
        if not got or any(n not in got for n in names):
            return None
        return {n: got[n] for n in names}

    return frame, figures


def trusted(observed: Observed | None, written: int | None, what: str) -> Observed | None:
    """`observed` when the commit's own metrics (`written`: the new rows it added, None when they
    do not say) agree with it; else None, logged: the window is then read at the commit's version."""
    if observed is None:
        log.info("no observed figures for %s (or a CHAR column): its window is read at its version", what)
        return None
    if written is None or written != observed.rows:
        log.warning(
            "%s wrote %s rows by its metrics, %d as observed: its window is read at its version",
            what,
            "unknown" if written is None else written,
            observed.rows,
        )
        return None
    return observed

"""The merge's source on Spark (Delta and Iceberg): its refusals folded into the MERGE itself.

Neither format's MERGE refuses what the operator must: Delta inserts a repeated key that matches
nothing twice, and neither sees a key the table holds in another window. A separate query before
the MERGE cost about a fifth of the MERGE (bench/results/overwrite-ab.md, "Merge: the key check
folded into the MERGE"). Instead the MERGE's source carries the refusals (`folded_source`): its
first key column goes through ``CASE WHEN <refused> THEN raise_error(..) ELSE key END``, refused
being a repeated key (``COUNT(*) OVER (PARTITION BY keys) > 1``), a NULL key part, a row outside
the window, or a key the table holds outside it (a LEFT JOIN of the table's keys there). A refused
row fails the statement in the cluster while the source is read, before any commit, as Iceberg's
overwrite refuses rows outside its window (`spark.iceberg.checked_rows`). Only after such a
failure does the naming query run (`check_merge_source`, `refusals_named`), raising the same
errors, naming the same keys and rows, as when it ran before every MERGE.

The count per key is deterministic (it depends on the source's rows only, not on their order), so
Delta, whose MERGE reads a source it does not materialize twice (once to find the files it
touches, once to write; ``merge.materializeSource=auto`` materializes a source reading anything
but Delta tables), computes the same refusal on each read (tests/spark/test_spark_merge_folded.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection
from sqlglot import exp

from airflow_idempotent.adapters.base import SOURCE_ALIAS, EngineAdapter, TableInfo
from airflow_idempotent.errors import SchemaError
from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkTableInfo, raise_error
from airflow_idempotent.strategies import SAMPLE_SIZE, check_keys, prepare, raise_held_outside
from airflow_idempotent.write_spec import WriteSpec

#: The text of the MERGE's own refusal of a source row (raise_error), found in its failure.
REFUSED = "airflow_idempotent: a row of the MERGE source is refused"
#: The derived tables and columns of the folded source (the user's SELECT, the table's keys
#: outside the window; the rows per key, the key as held outside the window).
ROWS = "_idem_rows"
HELD = "_idem_held_keys"
COUNT = "_idem_n"
HELD_KEY = "_idem_held"


def folded_source(
    adapter: SparkAdapter, spec: WriteSpec, columns: Sequence[str], keys: Sequence[str]
) -> exp.Subquery:
    """The MERGE's source: the SELECT's `columns`, its first key column refusing, by raise_error, a
    repeated or NULL key, a row outside the window and a key the table holds outside it (the last
    two with a partition column)."""
    src = exp.select(
        exp.Column(this=exp.Star(), table=exp.to_identifier(SOURCE_ALIAS, quoted=True)),
        exp.alias_(
            exp.Window(
                this=exp.Count(this=exp.Star()),
                partition_by=[adapter.column(k, SOURCE_ALIAS) for k in keys],
            ),
            COUNT,
        ),
    ).from_(adapter.source(spec.query), copy=False)
    refused: list[exp.Expr] = [
        exp.GT(this=adapter.column(COUNT, ROWS), expression=exp.Literal.number(1)),
        *[exp.Is(this=adapter.column(k, ROWS), expression=exp.null()) for k in keys],
    ]
    inside: exp.Expr | None = None
    if spec.partition_column is not None:
        part = adapter.column(spec.partition_column)
        elsewhere = exp.or_(
            exp.not_(exp.paren(adapter.in_window(spec.partition_column))),
            exp.Is(this=part, expression=exp.null()),
        )
        held = (
            exp.select(*[adapter.column(k) for k in keys])
            .from_(adapter.table(spec.table), copy=False)
            .where(elsewhere, copy=False)
        )
        on = exp.and_(
            *[exp.EQ(this=adapter.column(k, HELD), expression=adapter.column(k, SOURCE_ALIAS)) for k in keys]
        )
        src = src.select(exp.alias_(adapter.column(keys[0], HELD), HELD_KEY), copy=False).join(
            held.subquery(HELD, copy=False), on=on, join_type="left", copy=False
        )
        refused.append(exp.not_(exp.Is(this=adapter.column(HELD_KEY, ROWS), expression=exp.null())))
        inside = adapter.in_window(spec.partition_column, ROWS)
    key = adapter.column(keys[0], ROWS)
    ifs = [exp.If(this=exp.or_(*refused), true=raise_error(REFUSED))]
    if inside is not None:  # NULL or outside: refused, as Iceberg's overwrite refuses them
        ifs.append(exp.If(this=inside, true=key))
    checked = exp.Case(ifs=ifs, default=raise_error(REFUSED) if inside is not None else key.copy())
    projections: list[exp.Expr] = [adapter.column(c, ROWS) for c in columns]
    first = [c.lower() for c in columns].index(keys[0].lower())
    projections[first] = exp.alias_(checked, exp.to_identifier(columns[first], quoted=True))
    return exp.select(*projections).from_(src.subquery(ROWS, copy=False), copy=False).subquery(SOURCE_ALIAS)


def check_merge_source(
    adapter: EngineAdapter,
    conn: Connection,
    spec: WriteSpec,
    *,
    keys: Sequence[str],
    info: TableInfo,
    params: Mapping[str, Any],
) -> None:
    """`check_keys`, then `raise_held_outside` for a merge, from ONE query over the source and the
    table (`merge_source_problems`): the refused rows named. Typed for any adapter, so the one
    query is proved on every SQL engine too (tests/test_merge_keys.py)."""
    assert spec.partition_column is not None
    problems = adapter.merge_source_problems(
        spec.table, spec.query, keys, spec.partition_column, SAMPLE_SIZE + 1
    )
    rows = adapter.execute(conn, problems, params).all()
    check_keys(adapter, conn, spec, keys, params, rows=rows)
    held = [(*r[: len(keys)], r[-1]) for r in rows if r[len(keys) + 2]]
    raise_held_outside(adapter, conn, spec, info, keys, params, moving=True, rows=held)


@contextlib.contextmanager
def refusals_named(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    info: SparkTableInfo,
    keys: Sequence[str],
    params: Mapping[str, Any],
) -> Iterator[None]:
    """Around the MERGE: when the cluster refused a row of its source (`REFUSED`, nothing
    committed), the naming query's clear error (cause, keys or rows, fix) instead of Spark's; any
    other failure, or a refusal the naming query no longer finds (the table changed since), as
    it was."""
    try:
        yield
    except Exception as err:
        if REFUSED not in str(err):
            raise
        if spec.partition_column is None:
            check_keys(adapter, conn, spec, keys, params)  # type: ignore[arg-type]
        else:
            check_merge_source(adapter, conn, spec, info=info, keys=keys, params=params)  # type: ignore[arg-type]
        raise


def checked_merge_source(
    adapter: SparkAdapter,
    conn: SparkConnection,
    spec: WriteSpec,
    keys: Sequence[str],
    delete_missing: bool,
    check_format: Callable[[SparkTableInfo], None],
    described: SparkTableInfo | None = None,
) -> tuple[SparkTableInfo, list[str], dict[str, Any], list[str]]:
    """What a merge checks before its commit, with nothing written: the table's format
    (`check_format`) and the key columns; its source's rows are refused by the MERGE itself
    (`folded_source`). The table, the SELECT's columns, the parameters and the keys as the table
    spells them."""
    if delete_missing and spec.partition_column is None:
        raise SchemaError(
            "delete_missing=True needs a partition_column: without a window there is no set of rows "
            "the source is complete for."
        )
    info, columns, params = prepare(adapter, conn, spec, described)  # type: ignore[arg-type]
    assert isinstance(info, SparkTableInfo)
    check_format(info)
    key_names = [info.column(k, "key column").name for k in keys]
    missing = [k for k in key_names if k not in columns]
    if missing:
        raise SchemaError(f"the SELECT does not produce the key column(s) {missing}: select them.")
    return info, list(columns), dict(params), key_names

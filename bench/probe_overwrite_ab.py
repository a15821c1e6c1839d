#!/usr/bin/env python
"""Where the operator's overwrite commit exceeds the bare statement (issues #30 item 5, #36): the
write as the operator sends it, with each addition switched off one at a time, alternated in ONE
plugin-mode cluster.

    python bench/probe_overwrite_ab.py [--runs 3] [--format delta|iceberg|both] [--only a,b]

One cluster as bench_delta.py starts it (`--connect-mode plugin`, its 1,000,000-row window over a
3,000,000-row source). Each variant writes a table of its own (a Delta write rebuilds the state
of the commit before it unless its own path read it: tables shared between variants would move
that cost between them), each call in a new Spark Connect session as the operator opens one,
except ``bare``, the bench's baseline in one long-lived session. Each run starts one variant later,
after one warm-up each. Variants:

- ``bare`` / ``bare_new``: ``INSERT INTO t REPLACE WHERE .. SELECT`` in the long-lived session / a
  new one;
- ``operator``: ``PartitionOverwriteOperator.execute`` whole (its steps timed as in the bench);
- ``full``: the operator's committing call alone, as it makes it (captured from the operator:
  its typed SELECT, predicate, aggregates; the tag as session confs; the retry wrapper; on
  Iceberg the REFRESH, the current snapshot and the isolation options);
- ``no_checksum`` (count only observed), ``no_observe`` (nothing observed), ``no_tag`` (no
  session conf set or unset), ``no_retry`` (no retry wrapper), ``no_iso`` (Iceberg: no REFRESH, no
  snapshot read, no isolation options);
- ``tag_option``: the tag as a write option (Delta ``userMetadata``, Iceberg
  ``snapshot-property.<key>``) instead of session confs (Delta's constraint check conf still set);
- ``hash_nomask``: the checksum as one XXHASH64 over the columns summed (no NULL mask);
- ``plain``: ``writeTo(t).overwrite(pred)`` of the bare literal SELECT, nothing observed or tagged.

Prints each run's seconds and load, the medians and the ratio of each to ``bare``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import sys
import time
import uuid
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import pendulum  # noqa: E402
from bench_delta import ICE, WINDOW  # noqa: E402
from bench_spark import WINDOW_SQL  # noqa: E402
from probe_cluster import chosen, probe_cluster  # noqa: E402
from probe_delta_observe import DDL, SELECT, operator_write  # noqa: E402

from airflow_idempotent.operators import PartitionOverwriteOperator  # noqa: E402
from airflow_idempotent.spark import cluster as clusters  # noqa: E402
from airflow_idempotent.spark import delta, iceberg, observed, steps  # noqa: E402
from airflow_idempotent.spark.adapter import CONSTRAINT_CHECK, SparkAdapter, SparkEngine  # noqa: E402
from airflow_idempotent.spark.retry import retry_conflicts  # noqa: E402

VARIANTS = (
    "bare",
    "bare_new",
    "operator",
    "full",
    "no_checksum",
    "no_observe",
    "no_tag",
    "no_retry",
    "no_iso",
    "tag_option",
    "hash_nomask",
    "plain",
)
CONTEXT = dict.fromkeys(
    ("logical_date", "data_interval_start", "data_interval_end"), pendulum.datetime(2026, 8, 1, tz="UTC")
)


def nomask(aggregates: list[str]) -> list[str]:
    """The checksum aggregate with the NULL mask left out: SUM(CAST(XXHASH64(c1, .., cn) AS DECIMAL))."""
    inner = aggregates[1].split("XXHASH64(", 1)[1]
    columns = inner.split(", CAST(", 1)[0]  # the mask is the last argument, a CAST(.. AS BIGINT)
    return [aggregates[0], f"COALESCE(SUM(CAST(XXHASH64({columns}) AS DECIMAL(38, 0))), 0)"]


def build(fmt: str, spark: Any, cluster: clusters.SparkCluster, adapter: SparkAdapter) -> dict[str, Any]:
    """The variants of `fmt`, each on a table of its own, captured from one operator run."""
    prefix = ICE if fmt == "iceberg" else ""
    if fmt == "iceberg":
        spark.sql("CREATE NAMESPACE IF NOT EXISTS ice.bench")
    tables = {v: f"{prefix}ab_{fmt}_{v}" for v in VARIANTS}
    for table in tables.values():
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(DDL.format(name=table, fmt=fmt))
    module = delta if fmt == "delta" else iceberg
    op = PartitionOverwriteOperator(
        task_id=f"ab_{fmt}",
        table=tables["operator"],
        conn_id="bench_spark",
        partition_column="sale_date",
        sql=WINDOW_SQL,
        granularity="month",
        emit_asset=False,
    )
    _conn, _adapter, _table, select, predicate, binds, aggregates = operator_write(module, op, CONTEXT)[:7]
    print(f"{fmt}: select {select}\n  predicate {predicate} binds {binds}\n  aggregates {aggregates}")

    def committing(
        table: str,
        aggs: list[str],
        tag_conf: bool = True,
        tag_option: bool = False,
        retry: bool = True,
        iso: bool = True,
        sel: str = select,
        params: Any = binds,
        pred: str = predicate,
    ) -> Any:
        def run() -> None:
            with adapter.engine.connect() as conn:
                tag = delta.commit_tag(f"probe/{uuid.uuid4().hex}", "2026-08")

                def once() -> Any:
                    options: dict[str, str] = {}
                    if fmt == "iceberg" and iso:
                        conn.sql(adapter.refresh(table))
                        snapshot = iceberg.current_snapshot(conn, adapter, table)
                        options = iceberg.write_options(snapshot, tag)
                        options.pop(iceberg.TAG_OPTION)  # tagged below as asked
                    if tag_option:
                        key = "userMetadata" if fmt == "delta" else f"snapshot-property.{iceberg.TAG_KEY}"
                        options[key] = tag
                        if fmt == "delta":
                            conn.session.conf.set(CONSTRAINT_CHECK, "true")
                    tagging: Any = contextlib.nullcontext()
                    if tag_conf:
                        tagging = delta.tagged(conn, tag) if fmt == "delta" else iceberg.tagged(conn, tag)
                    with tagging:
                        return observed.write_observed(conn, adapter, table, sel, pred, params, aggs, options)

                got = retry_conflicts(once, ("never",), "probe", 60) if retry else once()
                if tag_conf or tag_option:
                    found = (
                        delta.commit_of(conn, adapter, table, tag)
                        if fmt == "delta"
                        else iceberg.snapshot_of(conn, adapter, table, tag)
                    )
                    assert found is not None
                return got

        return run

    def bare_new() -> None:
        session = cluster.session()
        try:
            session.sql(f"INSERT INTO {tables['bare_new']} REPLACE WHERE {WINDOW} {SELECT}")
        finally:
            session.stop()

    phases: dict[str, list[float]] = {}

    def operator() -> None:
        marks = [("start", time.perf_counter())]
        steps.step_hook = lambda name: marks.append((name, time.perf_counter()))
        op.execute(CONTEXT)
        steps.step_hook = None
        marks.append(("end", time.perf_counter()))
        for a, b in itertools.pairwise(marks):
            phases.setdefault(b[0], []).append(b[1] - a[1])

    PHASES[fmt] = phases
    count_only = aggregates[:1]
    out = {
        "bare": lambda: spark.sql(f"INSERT INTO {tables['bare']} REPLACE WHERE {WINDOW} {SELECT}"),
        "bare_new": bare_new,
        "operator": operator,
        "full": committing(tables["full"], aggregates),
        "no_checksum": committing(tables["no_checksum"], count_only),
        "no_observe": committing(tables["no_observe"], []),
        "no_tag": committing(tables["no_tag"], aggregates, tag_conf=False),
        "no_retry": committing(tables["no_retry"], aggregates, retry=False),
        "tag_option": committing(tables["tag_option"], aggregates, tag_conf=False, tag_option=True),
        "hash_nomask": committing(tables["hash_nomask"], nomask(aggregates)),
        "plain": committing(
            tables["plain"], [], tag_conf=False, iso=False, sel=SELECT, params={}, pred=WINDOW
        ),
    }
    if fmt == "iceberg":
        out["no_iso"] = committing(tables["no_iso"], aggregates, iso=False)
    out.update(merges(fmt, spark, adapter, tables))
    return out


#: The MERGE's source with the operator's refusals folded in: a repeated or NULL key, a row outside
#: the window (``m_folded_keys``) and (``m_folded``) a key the table holds outside the window fail
#: the statement by raise_error before its commit, instead of a query of their own before it.
FOLDED = (
    "SELECT CASE WHEN n > 1 OR sale_id IS NULL OR NOT ({window}) {held} THEN raise_error('refused') "
    "ELSE sale_id END AS sale_id, amount_eur, rate, sale_date FROM (SELECT src.*, "
    "COUNT(*) OVER (PARTITION BY src.sale_id) AS n {held_col} FROM ({query}) src {held_join})"
)


def merges(fmt: str, spark: Any, adapter: SparkAdapter, tables: dict[str, str]) -> dict[str, Any]:
    """The merge's variants: the bare MERGE (long-lived session), the operator's key check alone,
    the MERGE with the checks folded into its source (each in a new session, a table each)."""
    from sqlglot import parse_one

    prefix = ICE if fmt == "iceberg" else ""
    names = {v: f"{prefix}ab_{fmt}_{v}" for v in ("m_bare", "m_check", "m_folded", "m_folded_keys")}
    for table in names.values():
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(DDL.format(name=table, fmt=fmt))
        spark.sql(f"INSERT INTO {table} {SELECT}")

    def statement(table: str, source: str) -> str:
        return (
            f"MERGE INTO {table} t USING ({source}) s ON t.sale_id = s.sale_id AND "
            "t.sale_date >= DATE'2026-08-01' AND t.sale_date < DATE'2026-09-01' "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )

    def folded(table: str, held: bool) -> str:
        return FOLDED.format(
            window=WINDOW,
            query=SELECT,
            held="OR h IS NOT NULL" if held else "",
            held_col=", o.sale_id AS h" if held else "",
            held_join=(
                f"LEFT JOIN (SELECT sale_id FROM {table} WHERE NOT ({WINDOW})) o ON o.sale_id = src.sale_id"
                if held
                else ""
            ),
        )

    def fresh(text: str) -> Any:
        def run() -> None:
            with adapter.engine.connect() as conn:
                conn.session.sql(text)

        return run

    problems = adapter.merge_source_problems(
        names["m_check"], parse_one(SELECT, read="spark"), ["sale_id"], "sale_date", 11
    )
    check_sql = adapter.render(problems)

    def check() -> None:
        with adapter.engine.connect() as conn:
            rows = conn.sql(check_sql, BINDS).all()
            assert not rows, rows

    return {
        "m_bare": lambda: spark.sql(statement(names["m_bare"], SELECT)),
        "m_check": check,
        "m_folded_keys": fresh(statement(names["m_folded_keys"], folded(names["m_folded_keys"], False))),
        "m_folded": fresh(statement(names["m_folded"], folded(names["m_folded"], True))),
    }


PHASES: dict[str, dict[str, list[float]]] = {}
#: The window's bounds, as the operator binds them.
BINDS = {"window_start": date(2026, 8, 1), "window_end": date(2026, 9, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--format", choices=("delta", "iceberg", "both"), default="both")
    parser.add_argument("--only", help="comma-separated variant names")
    args = parser.parse_args()
    formats = ["delta", "iceberg"] if args.format == "both" else [args.format]
    with contextlib.ExitStack() as stack:
        probe = probe_cluster(stack, "idem_probe_ab", formats)
        cluster, spark = probe.cluster, probe.spark
        adapter = SparkAdapter(SparkEngine(cluster.connect_url))
        paths: dict[str, Any] = {}
        for fmt in formats:
            for name, run in build(fmt, spark, cluster, adapter).items():
                paths[f"{fmt}:{name}"] = run
        paths = chosen(paths, args.only)
        loads = [os.getloadavg()]
        for run in paths.values():  # warm-up
            run()
        for phases in PHASES.values():
            phases.clear()
        times: dict[str, list[float]] = {k: [] for k in paths}
        order = list(paths.items())
        for turn in range(args.runs):
            shift = turn % len(order)
            for name, run in order[shift:] + order[:shift]:
                t = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - t)
                print(
                    f"run {turn} {name:24s} {times[name][-1]:6.2f} s load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            loads.append(os.getloadavg())
        print("\nmedians (ratio to the format's bare):")
        for name, v in times.items():
            fmt = name.split(":")[0]
            base = statistics.median(times[f"{fmt}:bare"]) if f"{fmt}:bare" in times else float("nan")
            med = statistics.median(v)
            print(f"  {name:24s} {med:6.2f} s  {med / base:5.2f}x  ({', '.join(f'{x:.2f}' for x in v)})")
        for fmt, phases in PHASES.items():
            print(
                f"{fmt} operator steps: "
                + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in phases.items() if v)
            )
        print(
            "load averages (1, 5, 15 min) at the start and after each run:",
            [tuple(round(x, 1) for x in la) for la in loads],
        )


if __name__ == "__main__":
    main()

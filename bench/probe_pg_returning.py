#!/usr/bin/env python
"""Does the overwrite's checksum cost less read from its own INSERT's RETURNING than by a scan of
the written window? (issue #33, PostgreSQL; bench/results/write-engines.md, 2026-12-07.)

    python bench/probe_pg_returning.py [--rows 100000] [--rounds 12]

One process, the variants alternated in an order rotating each round, one warm-up round. Each
variant runs in one transaction after `VACUUM (ANALYZE)` and the window's DELETE (not timed), and
is rolled back; the SQL is the adapter's own (`insert_select`, `row_checksum`, `window_checksum`):

- ``separate``: the INSERT, then `window_checksum`'s scan of the window (what the overwrite does);
- ``separate_serial``: ``separate`` without parallel workers (the scan's CPU all in the backend);
- ``fused``: ``WITH ins AS (INSERT .. RETURNING <row hash> AS h, <in window> AS w) SELECT
  COUNT(*), COUNT(*) FILTER (WHERE w), <hash_total(h)> FROM ins``;
- ``fused_guarded``: the INSERT with the partition guard (`refuse_outside`: a row outside fails
  the statement), so RETURNING only the row hash;
- ``fused_mem``: ``fused`` after ``SET LOCAL work_mem = '64MB'`` (the CTE's tuple store in memory);
- ``insert``: the INSERT alone (the floor).

Prints per variant the wall and the backend's CPU (/proc/<pid>/schedstat: a parallel worker's
CPU is not in it, hence ``separate_serial``) as medians and mins, the paired medians over
``separate_serial``, and the count and checksum each variant computed (they must agree).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from sqlglot import exp  # noqa: E402

from airflow_idempotent.adapters.postgres import PostgresAdapter  # noqa: E402
from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payouts, create_sales  # noqa: E402
from airflow_idempotent.lint import check_deterministic  # noqa: E402

DB = "eng47_probe"
SERVER = "postgresql+psycopg2://postgres@127.0.0.1:5432"
DAY = dt.date(2026, 8, 25)
COLUMNS = ["sale_id", "sale_date", "amount_eur", "rate"]
#: The checksum's scan without a parallel worker, so that the backend's CPU is all of its CPU.
SERIAL = "SET LOCAL max_parallel_workers_per_gather = 0"


def admin(sql: str) -> None:
    engine = sa.create_engine(f"{SERVER}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(sa.text(sql))
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB}"')
    try:
        run(args.rows, args.rounds)
    finally:
        admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')


def variants(adapter: PostgresAdapter, engine: sa.Engine) -> dict[str, list[str]]:
    """Each variant's statements, rendered by the adapter."""
    with engine.connect() as c:
        info = adapter.describe(c, "payouts")
    query = check_deterministic(PAYOUT_SQL, "postgres")
    row_hash = adapter.row_checksum(sorted(info.columns.values(), key=lambda c: c.name.lower()))
    insert = adapter.insert_select("payouts", COLUMNS, query)
    guarded = adapter.insert_select("payouts", COLUMNS, query, info.columns["sale_date"])

    def fused(statement: exp.Insert, flag: bool) -> str:
        statement = statement.copy()
        returned = [exp.alias_(row_hash.copy(), "h")]
        if flag:
            returned.append(exp.alias_(adapter.in_window("sale_date"), "w"))
        statement.set("returning", exp.Returning(expressions=returned))
        select = exp.select(exp.Count(this=exp.Star()))
        if flag:
            in_window = exp.Where(this=exp.column("w"))
            select = select.select(exp.Filter(this=exp.Count(this=exp.Star()), expression=in_window))
        select = select.select(adapter.hash_total(exp.column("h"))).from_("ins")
        return adapter.render(select.with_("ins", as_=statement))

    checksum = adapter.window_checksum("payouts", "sale_date", list(info.columns.values()))
    return {
        "separate": [adapter.render(insert), adapter.render(checksum)],
        "separate_serial": [SERIAL, adapter.render(insert), adapter.render(checksum)],
        "fused": [fused(insert, True)],
        "fused_guarded": [fused(guarded, False)],
        "fused_mem": ["SET LOCAL work_mem = '64MB'", fused(insert, True)],
        "insert": [adapter.render(insert)],
    }


def run(rows: int, rounds: int) -> None:
    engine = sa.create_engine(f"{SERVER}/{DB}")
    create_sales(engine, days=1, per_day=rows, start=DAY)
    create_payouts(engine)
    params = {"window_start": DAY, "window_end": DAY + dt.timedelta(days=1), "policy_version": "v1"}
    with engine.begin() as c:
        c.execute(sa.text(f"INSERT INTO payouts ({', '.join(COLUMNS)}) {PAYOUT_SQL}"), params)
    adapter = PostgresAdapter(engine)
    statements = variants(adapter, engine)
    delete = adapter.render(adapter.delete_window("payouts", "sale_date"))
    names = list(statements)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    values: dict[str, set[tuple[Any, ...]]] = {n: set() for n in names}
    for r in range(rounds + 1):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                c.execute(sa.text("VACUUM (ANALYZE) payouts"))
            with engine.connect() as c:
                stat = Path(f"/proc/{c.connection.dbapi_connection.get_backend_pid()}/schedstat")
                c.execute(sa.text(delete), params)
                c0, t0 = int(stat.read_text().split()[0]), time.perf_counter()
                for sql in statements[name]:
                    result = c.execute(sa.text(sql), params)
                    out = result.fetchall() if result.returns_rows else None
                t1, c1 = time.perf_counter(), int(stat.read_text().split()[0])
                c.rollback()
            if r:
                wall[name].append((t1 - t0) * 1000)
                cpu[name].append((c1 - c0) / 1e6)
            if out:
                values[name].add(tuple(out[0]))
    print(f"rows {rows}, rounds {rounds}, load {os.getloadavg()}")
    for n in names:
        over_wall = statistics.median(a - b for a, b in zip(wall[n], wall["separate_serial"], strict=True))
        over_cpu = statistics.median(a - b for a, b in zip(cpu[n], cpu["separate_serial"], strict=True))
        print(
            f"{n:15s} wall median {statistics.median(wall[n]):7.1f} min {min(wall[n]):7.1f}   "
            f"cpu median {statistics.median(cpu[n]):7.1f} min {min(cpu[n]):7.1f}   "
            f"over separate_serial, paired medians: wall {over_wall:6.1f} cpu {over_cpu:6.1f}   {values[n]}"
        )
    engine.dispose()


if __name__ == "__main__":
    main()

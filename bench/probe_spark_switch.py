"""How to move a month's partitions to new locations fastest: one SET LOCATION per round trip, the
same in one SQL script (BEGIN .. END), or several statements at once from threads of one session.

    python bench/probe_spark_switch.py [rounds] [sc://host:port]

Starts a throw-away cluster (or uses the Connect URL given), makes a 31-day parquet table, and
alternates the three ways `rounds` times (ABC ABC ..), each moving every day to a new directory
name (the directories need not hold data: the catalog is all these statements touch). Prints
each round's seconds and the load average, then the medians.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_idempotent.spark.cluster import SparkCluster

DAYS = 31


def probe(session: Any, rounds: int) -> dict[str, list[float]]:
    session.sql("DROP TABLE IF EXISTS probe_switch")
    session.sql("CREATE TABLE probe_switch (id INT, d DATE) USING parquet PARTITIONED BY (d)")
    session.sql(
        "INSERT INTO probe_switch SELECT id, date_add(DATE'2026-08-01', CAST(id % 31 AS INT)) "
        "FROM range(3100)"
    )
    rows = session.sql("DESCRIBE TABLE EXTENDED probe_switch").collect()
    base = next(str(r[1]) for r in rows if str(r[0]).strip() == "Location")
    generation = [0]

    def statements() -> list[str]:
        generation[0] += 1
        return [
            f"ALTER TABLE probe_switch PARTITION (d = '2026-08-{n:02d}') "
            f"SET LOCATION '{base}/g{generation[0]}/d=2026-08-{n:02d}'"
            for n in range(1, DAYS + 1)
        ]

    def serial() -> None:
        for statement in statements():
            session.sql(statement)

    def script() -> None:
        session.sql("BEGIN " + " ".join(f"{s};" for s in statements()) + " END")

    def threads() -> None:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(session.sql, statements()))

    ways: dict[str, Callable[[], None]] = {"serial": serial, "script": script, "threads4": threads}
    took: dict[str, list[float]] = {name: [] for name in ways}
    for n in range(rounds):
        for name, way in ways.items():
            began = time.monotonic()
            way()
            took[name].append(time.monotonic() - began)
        line = ", ".join(f"{name} {times[-1]:.2f} s" for name, times in took.items())
        print(f"round {n + 1}: {line}; load {os.getloadavg()[0]:.2f}", flush=True)
    session.sql("DROP TABLE probe_switch")
    return took


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    url = sys.argv[2] if len(sys.argv) > 2 else None
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory() as base:
        cluster = None if url else SparkCluster.start(base)
        try:
            session = SparkSession.builder.remote(url or cluster.connect_url).create()  # type: ignore[union-attr]
            print("scripting enabled:", session.conf.get("spark.sql.scripting.enabled"))
            took = probe(session, rounds)
            session.stop()
        finally:
            if cluster is not None:
                cluster.stop()
    for name, times in took.items():
        print(f"{name}: median {statistics.median(times):.2f} s of {DAYS} moves")


if __name__ == "__main__":
    main()

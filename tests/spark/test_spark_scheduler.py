"""A guarded corrective month v1 -> v2 on Spark, backfilled through Airflow's REST API by a real scheduler.

The Airflow deployment of tests/e2e/conftest.py (API server with the guard middleware, scheduler
with the listener, DAG processor, LocalExecutor, history on PostgreSQL) runs the guarded payouts
DAG of tests/spark/dags/spark_guarded_month.py against the session's Spark cluster
(tests/spark/conftest.py), through a `spark_connect` connection created with the REST API. The
month starts as plain Spark wrote it under v1 (INSERTs by the test, no product code), with a
neighbour day on each side and a stale payout on 2026-08-31 (a day without sales); one corrective
backfill (POST /api/v2/backfills) of the DAG's monthly window rewrites it under v2 and empties the 31st.

Every expected figure comes from the scenario's formula in pure Python (test_guarded_month.truth,
repriced); production is read back with plain Spark SQL, the partitions' files from Spark's own
file metadata.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import time
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent.checksum import checksum_rows
from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.history import HistoryStore, switches
from airflow_idempotent.spark.cluster import SparkCluster
from tests.conftest import REPO_ROOT
from tests.e2e.conftest import AirflowCluster, airflow_cluster, e2e_dags, quiet  # noqa: F401  (fixtures)
from tests.e2e.test_guarded_month import (
    MONTH,
    V2_FIX,
    month_total,
    parse_time,
    repriced,
    run_to_completion,
    store,  # noqa: F401  (the history store of `cluster` below, as a fixture)
    truth,
)
from tests.spark.payouts_spark import all_days, create_payouts

pytestmark = pytest.mark.spark

DAG_FILE = Path(__file__).with_name("dags") / "spark_guarded_month.py"
DAG_ID = "idem_spark_payouts_overwrite"
CONN_ID = "idem_spark_month"
TABLE = "payouts_scheduled"
TARGET = f"{CONN_ID}:{TABLE}"
#: The same DAG on a Delta table (the guard commits it by one REPLACE WHERE from its staging).
DELTA_DAG_ID, DELTA_TABLE = "idem_spark_payouts_delta", "payouts_scheduled_delta"
#: Days next to the month, written by the test and never by the backfill.
NEIGHBOURS = {date(2026, 7, 31): [(900001, "12.34"), (900002, "0.01")], date(2026, 9, 1): [(900003, "5.00")]}
#: A stale payout on the month's last day, which has no sales: the corrective month must empty it.
AUGUST_31 = date(2026, 8, 31)
STALE = (900004, "7.77")


@pytest.fixture(scope="module")
def client(spark_cluster: SparkCluster) -> Iterator[Any]:
    """The test's own Spark Connect client (setup and checks, never the code under test)."""
    session = spark_cluster.session()
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def cluster(
    spark_cluster: SparkCluster, client: Any, request: pytest.FixtureRequest
) -> Iterator[AirflowCluster]:
    """The Airflow deployment, the connection, the DAGs unpaused (each test loads its table's month:
    `make test` runs the Delta one only, and a parquet month loaded for nothing cost a 60,000-row
    write)."""
    dags: Path = request.getfixturevalue("e2e_dags")  # the e2e fixtures, imported above
    (dags / DAG_FILE.name).write_text(DAG_FILE.read_text())
    started = time.monotonic()
    airflow: AirflowCluster = request.getfixturevalue("airflow_cluster")
    print(f"\n[timing] airflow cluster up: {time.monotonic() - started:.1f} s")
    connection = {
        "connection_id": CONN_ID,
        "conn_type": "spark_connect",
        "host": "127.0.0.1",
        "port": spark_cluster.connect_port,
    }
    airflow.request("POST", "/api/v2/connections", connection)
    airflow.wait_for(
        f"{DAG_ID} to be parsed", lambda: airflow.request("GET", f"/api/v2/dags/{DAG_ID}"), 120, every=1
    )
    for dag_id in (DAG_ID, DELTA_DAG_ID):
        airflow.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
    try:
        yield airflow
    finally:
        quiet(airflow, DAG_ID)
        quiet(airflow, DELTA_DAG_ID)


def load_month(client: Any, table: str, using: str) -> None:
    """`table` of format `using` as plain Spark wrote it: the month under v1, the neighbours, the stale
    payout on the 31st (INSERTs by the test, no product code)."""
    create_payouts(client, table, using=using)
    client.sql(
        f"INSERT INTO {table} SELECT p.sale_id, p.amount_eur, p.rate, p.sale_date FROM ({PAYOUT_SQL}) p",
        args={"window_start": MONTH[0], "window_end": MONTH[-1] + timedelta(days=1), "policy_version": "v1"},
    )
    extra = [(i, a, d) for d, rows in {**NEIGHBOURS, AUGUST_31: [STALE]}.items() for i, a in rows]
    values = ", ".join(f"(:i{n}, CAST(:a{n} AS DECIMAL(12,2)), 0.60, :d{n})" for n in range(len(extra)))
    binds = {f"{k}{n}": v for n, row in enumerate(extra) for k, v in zip("iad", row, strict=True)}
    client.sql(f"INSERT INTO {table} VALUES {values}", args=binds)


def files(client: Any, days: list[date], table: str = TABLE) -> dict[date, set[str]]:
    """The parquet files each day's rows are read from (Spark's file metadata)."""
    client.sql(f"REFRESH TABLE {table}")
    rows = client.sql(
        f"SELECT DISTINCT sale_date, _metadata.file_path AS path FROM {table} WHERE sale_date IN "
        f"({', '.join(repr(day.isoformat()) for day in days)})"
    ).collect()
    out: dict[date, set[str]] = {day: set() for day in days}
    for row in rows:
        out[row["sale_date"]].add(row["path"])
    return out


def bare(location: str) -> str:
    """A file location without its scheme and with one leading slash (file:/x, file:///x and /x alike)."""
    return "/" + (location.split(":", 1)[1] if location.startswith("file:") else location).lstrip("/")


def load(path: Path) -> Any:
    """A DAG file as a module (its guard is compared, nothing runs)."""
    spec = importlib.util.spec_from_file_location(f"_dag_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figures(days: dict[date, list[tuple[int, str]]]) -> dict[date, tuple[int, Decimal]]:
    return {day: (len(rows), sum((Decimal(a) for _, a in rows), Decimal("0"))) for day, rows in days.items()}


# The scheduler's path does not depend on the table's format; `make test` runs it on Delta (below),
# `make reliability` on parquet too (the partition switch under the guard: test_spark_guard.py).
@pytest.mark.exhaustive
def test_a_guarded_corrective_month_on_spark_through_the_scheduler(
    cluster: AirflowCluster,
    client: Any,
    store: HistoryStore,  # noqa: F811  (the imported fixture)
) -> None:
    guards = [load(path).GUARD for path in (REPO_ROOT / "dags" / "payouts.py", DAG_FILE)]
    assert dataclasses.replace(guards[0], granularity="month") == guards[1], "the project's guard, by month"
    load_month(client, TABLE, "parquet")
    v1, v2 = truth("v1"), truth("v2")
    stale_amount = STALE[1]
    assert all_days(client, TABLE) == {**v1, **figures(NEIGHBOURS), AUGUST_31: (1, Decimal(stale_amount))}
    neighbours_before = files(client, sorted(NEIGHBOURS))
    assert all(neighbours_before.values())

    started = time.monotonic()
    fix = run_to_completion(cluster, "spark v2 corrective", V2_FIX, MONTH[0], MONTH[0], 1, dag_id=DAG_ID)
    print(f"\n[timing] corrective month on Spark through the scheduler: {time.monotonic() - started:.1f} s")

    # production: the month is v2 day by day, the stale day emptied, the neighbours the same files
    assert all_days(client, TABLE) == {**v2, **figures(NEIGHBOURS)}
    assert files(client, sorted(NEIGHBOURS)) == neighbours_before
    rows = client.sql(f"SELECT count(*) AS n, count(DISTINCT sale_id) AS k FROM {TABLE}").collect()[0]
    assert rows["n"] == rows["k"] == len(MONTH) * 2000 + 3

    # history: one corrective write of the month, its diff by sale_id computed in the cluster
    created, completed = parse_time(fix["created_at"]), parse_time(fix["completed_at"])
    [w] = [w for w in store.writes(dag_id=DAG_ID, target=TARGET) if created <= w["written_at"] <= completed]
    assert (w["window_start"].date(), w["window_end"].date()) == (MONTH[0], date(2026, 9, 1))
    assert (w["status"], w["semantics"], w["policy_version"]) == ("written", "corrective", "v2")
    assert (w["run_type"], w["ordinal"], w["row_count"]) == ("backfill", 1, 60000)
    assert checksum_rows(w["checksum"]) == 60000
    changed = sum(repriced(d) for d in MONTH)
    diff = json.loads(w["diff"])
    assert (diff["rows_before"], diff["rows_after"]) == (60001, 60000), diff
    assert (diff["added"], diff["removed"], diff["changed"]) == (0, 1, changed), diff
    assert diff["unchanged"] == 60000 - changed, diff
    amount = diff["measures"]["amount_eur"]
    assert Decimal(str(amount["before"])) == month_total(v1) + Decimal(stale_amount), amount
    assert Decimal(str(amount["after"])) == month_total(v2), amount

    # the switch, per day: one plan done; each day of August set to the attempt's directory, which
    # that day's rows are now read from; the 31st, which the month no longer has, dropped
    [plan] = switches.plans(store, TARGET, (switches.DONE,))
    assert (plan.window_start.date(), plan.window_end.date()) == (MONTH[0], date(2026, 9, 1))
    assert (plan.row_count, plan.checksum) == (60000, w["checksum"])
    expected_ops = [
        {"op": "set", "value": d.isoformat(), "location": f"{plan.location}/sale_date={d.isoformat()}"}
        for d in MONTH
    ]
    assert plan.operations == [*expected_ops, {"op": "drop", "value": AUGUST_31.isoformat()}]
    read = files(client, MONTH)
    for op, day in zip(expected_ops, MONTH, strict=True):
        assert {bare(path.rsplit("/", 1)[0]) for path in read[day]} == {bare(op["location"])}, day
    partitions = {r[0] for r in client.sql(f"SHOW PARTITIONS {TABLE}").collect()}
    assert f"sale_date={AUGUST_31.isoformat()}" not in partitions and len(partitions) == len(MONTH) + 2
    assert not switches.unfinished(store, TARGET)
    assert not [t.name for t in client.catalog.listTables() if t.name.startswith("_idem_stg_")]
    print(
        f"\n[figures] month v1 {month_total(v1)} (+{stale_amount} stale on {AUGUST_31}) -> v2 "
        f"{month_total(v2)}; diff changed {changed}, removed 1; {len(plan.operations)} partition switches"
    )


def delta_version(client: Any, table: str) -> int:
    return int(client.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["version"])


def test_a_guarded_corrective_month_on_delta_through_the_scheduler(
    cluster: AirflowCluster,
    client: Any,
    store: HistoryStore,  # noqa: F811  (the imported fixture)
) -> None:
    """The same backfill on a Delta table: staged, diffed, then one REPLACE WHERE commit of the month."""
    load_month(client, DELTA_TABLE, "delta")
    v1, v2 = truth("v1"), truth("v2")
    assert all_days(client, DELTA_TABLE) == {**v1, **figures(NEIGHBOURS), AUGUST_31: (1, Decimal(STALE[1]))}
    neighbours_before = files(client, sorted(NEIGHBOURS), DELTA_TABLE)
    assert all(neighbours_before.values())
    before = delta_version(client, DELTA_TABLE)

    fix = run_to_completion(
        cluster, "delta v2 corrective", V2_FIX, MONTH[0], MONTH[0], 1, dag_id=DELTA_DAG_ID
    )

    # production: the month is v2 day by day, the 31st emptied, the neighbours' files untouched, in
    # one commit of the table (the staging's own commits are another table's)
    assert all_days(client, DELTA_TABLE) == {**v2, **figures(NEIGHBOURS)}
    assert files(client, sorted(NEIGHBOURS), DELTA_TABLE) == neighbours_before
    rows = client.sql(f"SELECT count(*) AS n, count(DISTINCT sale_id) AS k FROM {DELTA_TABLE}").collect()[0]
    assert rows["n"] == rows["k"] == len(MONTH) * 2000 + 3
    assert delta_version(client, DELTA_TABLE) == before + 1
    [operation] = [
        r["operation"]
        for r in client.sql(f"DESCRIBE HISTORY {DELTA_TABLE}").collect()
        if int(r["version"]) == before + 1
    ]
    assert operation == "WRITE", operation  # REPLACE WHERE is a WRITE with a predicate

    # history: one corrective write of the month, its diff by sale_id, the commit's version named
    created, completed = parse_time(fix["created_at"]), parse_time(fix["completed_at"])
    target = f"{CONN_ID}:{DELTA_TABLE}"
    [w] = [
        w for w in store.writes(dag_id=DELTA_DAG_ID, target=target) if created <= w["written_at"] <= completed
    ]
    assert (w["window_start"].date(), w["window_end"].date()) == (MONTH[0], date(2026, 9, 1))
    assert (w["status"], w["semantics"], w["policy_version"]) == ("written", "corrective", "v2")
    assert (w["run_type"], w["row_count"]) == ("backfill", 60000)
    assert f"table version {before + 1}" in (w["message"] or ""), w["message"]
    changed = sum(repriced(d) for d in MONTH)
    diff = json.loads(w["diff"])
    assert (diff["rows_before"], diff["rows_after"]) == (60001, 60000), diff
    assert (diff["added"], diff["removed"], diff["changed"]) == (0, 1, changed), diff
    amount = diff["measures"]["amount_eur"]
    assert Decimal(str(amount["before"])) == month_total(v1) + Decimal(STALE[1]), amount
    assert Decimal(str(amount["after"])) == month_total(v2), amount
    assert not [t.name for t in client.catalog.listTables() if t.name.startswith("_idem_stg_")]

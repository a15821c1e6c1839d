"""End to end: a backfill triggers downstream DAGs only for the windows whose content changed.

A real scheduler, DAG processor and API server (tests/e2e/conftest.py). Ten days of payouts are
written once (in this process, through the operator, into the cluster's warehouse and history);
then a backfill of the ten days through the REST API reproduces every day: no asset event, and
the DAG scheduled on the asset never runs. The source is then corrected on three of the days (one
sale each repriced, by hand here) and the ten days are backfilled again: exactly three events,
one per corrected day, and the downstream DAG runs once per corrected day. The corrective
backfill runs one window at a time (max_active_runs=1): Airflow folds events that arrive between
two scheduler loops into one downstream run, so "once per window" needs them apart.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payouts, create_sales
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.operators import PartitionOverwriteOperator
from tests.conftest import PG_HOST, PG_PORT, PG_USER
from tests.e2e.conftest import AirflowCluster, warehouse_database
from tests.e2e.test_guarded_month import run_to_completion

pytestmark = pytest.mark.e2e

UP, DOWN = "changed_events_up", "changed_events_down"
CONN_ID = "idem_e2e_changed_events"
FIRST, DAYS = date(2026, 8, 1), 10
LAST = FIRST + timedelta(DAYS - 1)
CORRECTED = (date(2026, 8, 2), date(2026, 8, 5), date(2026, 8, 8))
PER_DAY = 2000
TIMEOUT = 300.0
SETTLE = 15.0  # scheduler loops after the last event: time to (wrongly) start a downstream run

DAG_FILE = f'''
import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.operators import PartitionOverwriteOperator
from airflow_idempotent.operators.assets import target_asset

START = pendulum.datetime(2026, 8, 1, tz="UTC")
END = pendulum.datetime(2026, 8, 31, tz="UTC")

# end_date: no scheduled run of today's window (a first write, so an event) beside the backfills
with DAG(dag_id="{UP}", schedule="@daily", start_date=START, end_date=END, catchup=False, max_active_runs=10):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="{CONN_ID}",
        table="payouts",
        partition_column="sale_date",
        granularity="day",
        sql=PAYOUT_SQL,
        parameters={{"policy_version": "v1"}},
    )

with DAG(dag_id="{DOWN}", schedule=[target_asset("{CONN_ID}", "payouts")], start_date=START, catchup=False):
    EmptyOperator(task_id="read_payouts")
'''


@pytest.fixture(scope="module")
def cluster(e2e_dags: Path, request: pytest.FixtureRequest) -> AirflowCluster:
    (e2e_dags / "changed_events.py").write_text(DAG_FILE)
    cluster: AirflowCluster = request.getfixturevalue("airflow_cluster")
    return cluster


def fill(engine: sa.Engine) -> None:
    create_sales(engine, days=DAYS, per_day=PER_DAY, start=FIRST)
    create_payouts(engine)


@pytest.fixture(scope="module")
def warehouse(cluster: AirflowCluster) -> Iterator[sa.Engine]:
    with warehouse_database(cluster, "events", CONN_ID, (DOWN, UP), fill) as engine:
        yield engine


def write_days_here(cluster: AirflowCluster, engine: sa.Engine) -> None:
    """Each day's first write, by the operator in this process (the cluster's warehouse and history):
    the backfills below then rewrite days that already hold their rows."""
    conn = {"conn_type": "postgres", "host": PG_HOST, "port": PG_PORT, "login": PG_USER}
    env = {
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps({**conn, "schema": engine.url.database}),
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY": cluster.env["AIRFLOW_CONN_IDEMPOTENT_HISTORY"],
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        for n in range(DAYS):
            at = pendulum.datetime(2026, 8, 1, tz="UTC").add(days=n)
            PartitionOverwriteOperator(
                task_id="write_payouts",
                conn_id=CONN_ID,
                table="payouts",
                partition_column="sale_date",
                granularity="day",
                sql=PAYOUT_SQL,
                parameters={"policy_version": "v1"},
            ).execute({"logical_date": at, "data_interval_start": at, "data_interval_end": at})  # type: ignore[arg-type]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def written(store: HistoryStore) -> list[dict[str, Any]]:
    return [w for w in store.writes(target=f"{CONN_ID}:payouts") if w["status"] == "written"]


def upstream_events(cluster: AirflowCluster) -> list[dict[str, Any]]:
    answer = cluster.request("GET", f"/api/v2/assets/events?source_dag_id={UP}&limit=100")
    return list(answer["asset_events"])


def downstream_runs(cluster: AirflowCluster) -> list[dict[str, Any]]:
    return list(cluster.request("GET", f"/api/v2/dags/{DOWN}/dagRuns?limit=100")["dag_runs"])


def consumed_windows(cluster: AirflowCluster, run_id: str) -> list[str]:
    answer = cluster.request("GET", f"/api/v2/dags/{DOWN}/dagRuns/{run_id}/upstreamAssetEvents")
    return [e["extra"]["window"] for e in answer["asset_events"]]


def reprice(engine: sa.Engine, days: tuple[date, ...]) -> None:
    """The source's correction: the first sale of each day costs 1.00 EUR more."""
    first_ids = [(day - FIRST).days * PER_DAY + 1 for day in days]
    with engine.begin() as conn:
        for sale_id in first_ids:
            conn.execute(
                sa.text("UPDATE sales SET price_eur = price_eur + 1 WHERE sale_id = :i"), {"i": sale_id}
            )


def test_downstream_runs_only_for_changed_windows(cluster: AirflowCluster, warehouse: sa.Engine) -> None:
    started = time.monotonic()
    write_days_here(cluster, warehouse)

    store = HistoryStore(sa.create_engine(cluster.history_url))
    assert len(written(store)) == DAYS  # each day's first write is recorded (none spooled)

    run_to_completion(cluster, "10 unchanged days", {}, FIRST, LAST, 5, dag_id=UP)
    time.sleep(SETTLE)
    events = upstream_events(cluster)
    assert events == [], (
        [e["extra"] for e in events],
        [
            (w["window_label"], w["run_id"], w["ordinal"], w["dataset_version"], w["checksum"])
            for w in written(store)
        ],
    )
    assert downstream_runs(cluster) == []
    unchanged = time.monotonic() - started

    reprice(warehouse, CORRECTED)
    run_to_completion(cluster, "3 of 10 days corrected", {}, FIRST, LAST, 1, dag_id=UP)
    expected = sorted(day.isoformat() for day in CORRECTED)
    assert sorted(e["extra"]["window"] for e in upstream_events(cluster)) == expected

    def downstream_done() -> list[dict[str, Any]]:
        done = [r for r in downstream_runs(cluster) if r["state"] == "success"]
        return done if len(done) >= len(CORRECTED) else []

    cluster.wait_for("a downstream run per corrected day", downstream_done, TIMEOUT)
    time.sleep(SETTLE)
    found = downstream_runs(cluster)
    assert len(found) == len(CORRECTED), [r["dag_run_id"] for r in found]
    assert sorted(w for r in found for w in consumed_windows(cluster, r["dag_run_id"])) == expected
    print(f"\n[timing] unchanged backfill {unchanged:.1f} s, whole test {time.monotonic() - started:.1f} s")

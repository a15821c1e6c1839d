"""End to end: partitioned payouts on a real scheduler (Airflow 3.2+ partitioned assets).

dags/payouts_partitioned.py on the cluster of tests/e2e/conftest.py: two runs of the upstream DAG
are triggered through the REST API with the partition keys of 25 and 26 August; each writes its
day (the window from the partition key), its asset event carries the key, and the downstream
partitioned DAG runs exactly once per partition written, with the key mapped to the day, and
rewrites that day of its summary. Expected figures come from the scenario's formula.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_sales
from tests.conftest import REPO_ROOT
from tests.e2e.conftest import AirflowCluster, warehouse_database
from tests.e2e.test_guarded_month import truth

pytestmark = pytest.mark.e2e

DAG_FILE = REPO_ROOT / "dags" / "payouts_partitioned.py"
UPSTREAM, DOWNSTREAM = "payouts_partitioned", "payout_days"
CONN_ID = "idem_e2e_partition_warehouse"
DAYS = {"2026-08-25T00:00:00": date(2026, 8, 25), "2026-08-26T00:00:00": date(2026, 8, 26)}
TIMEOUT = 300.0


@pytest.fixture(scope="module")
def cluster(e2e_dags: Path, request: pytest.FixtureRequest) -> AirflowCluster:
    source = DAG_FILE.read_text()
    assert 'CONN_ID = "warehouse"' in source
    (e2e_dags / DAG_FILE.name).write_text(source.replace('CONN_ID = "warehouse"', f'CONN_ID = "{CONN_ID}"'))
    cluster: AirflowCluster = request.getfixturevalue("airflow_cluster")
    return cluster


@pytest.fixture(scope="module")
def warehouse(cluster: AirflowCluster) -> Iterator[sa.Engine]:
    """A fresh PostgreSQL warehouse holding the scenario's sales; both DAGs unpaused; dropped after."""
    with warehouse_database(cluster, "part", CONN_ID, (DOWNSTREAM, UPSTREAM), create_sales) as engine:
        yield engine


def runs(cluster: AirflowCluster, dag_id: str) -> list[dict[str, Any]]:
    return list(cluster.request("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"])


def test_downstream_runs_once_per_written_partition(cluster: AirflowCluster, warehouse: sa.Engine) -> None:
    for key in DAYS:
        cluster.request(
            "POST", f"/api/v2/dags/{UPSTREAM}/dagRuns", {"partition_key": key, "logical_date": None}
        )

    def upstream_done() -> list[dict[str, Any]]:
        done = [r for r in runs(cluster, UPSTREAM) if r["partition_key"] in DAYS]
        failed = [r for r in done if r["state"] == "failed"]
        assert not failed, f"upstream runs failed: {failed}\n{cluster.logs()}"
        return done if len(done) == len(DAYS) and all(r["state"] == "success" for r in done) else []

    cluster.wait_for("the two upstream partitions", upstream_done, TIMEOUT)
    expected = {day.isoformat() for day in DAYS.values()}

    def downstream_done() -> list[dict[str, Any]]:
        mine = [r for r in runs(cluster, DOWNSTREAM) if r["partition_key"] in expected]
        ok = {r["partition_key"] for r in mine if r["state"] == "success"}
        return mine if ok == expected else []

    cluster.wait_for("one downstream run per partition", downstream_done, TIMEOUT)
    time.sleep(10)  # a few scheduler loops: time to (wrongly) queue a second run of a partition
    keys = Counter(r["partition_key"] for r in runs(cluster, DOWNSTREAM))
    assert {k: keys[k] for k in expected} == dict.fromkeys(expected, 1), keys
    assert all(n == 1 for n in keys.values()), f"a partition ran twice downstream: {keys}"

    # the upstream asset events carry the partition keys (column and extra)
    answer = cluster.request("GET", f"/api/v2/assets/events?source_dag_id={UPSTREAM}&limit=100")
    events = [e for e in answer["asset_events"] if e["partition_key"] in DAYS]
    assert sorted(e["partition_key"] for e in events) == sorted(DAYS)
    for event in events:
        assert event["extra"]["partition_key"] == event["partition_key"]
        assert event["extra"]["window"] == DAYS[event["partition_key"]].isoformat()

    # each day written from its partition: the scenario's figures, upstream and downstream
    with warehouse.connect() as conn:
        upstream = dict(
            conn.execute(
                sa.text("SELECT sale_date, COUNT(*) FROM payouts_partitioned GROUP BY sale_date")
            ).all()
        )
        summary = {
            d: (n, Decimal(a))
            for d, n, a in conn.execute(
                sa.text("SELECT sale_date, payouts, amount_eur FROM payout_days ORDER BY sale_date")
            ).all()
        }
    for day in DAYS.values():
        assert upstream[day] == 2000
        assert summary[day] == truth("v1")[day]
    assert summary[date(2026, 8, 25)] == (2000, Decimal("299730.00"))

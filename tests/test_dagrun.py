"""Real Airflow runs: `airflow dags test` of the example DAGs, the demo, provider registration.

A handful only (each costs 5-15 s); the operators' logic is covered through their own API in
test_operators.py. Expected figures come from the scenario's formula computed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts, create_sales, simulate_crash, window_totals
from tests.test_operators import DAY, day_truth

pytestmark = pytest.mark.dagrun

REPO = Path(__file__).resolve().parent.parent
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def airflow(*args: str, dags: Path = REPO / "dags", env: dict[str, str] | None = None) -> str:
    full = {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(dags), **(env or {})}
    proc = subprocess.run([AIRFLOW, *args], env=full, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (
        f"airflow {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout + proc.stderr


def test_provider_is_registered(airflow_home: Path) -> None:
    out = airflow("providers", "list", "--output", "json")
    names = {p["package_name"] for p in json.loads(out[out.index("[") : out.rindex("]") + 1])}
    assert "airflow-idempotent" in names


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
@pytest.mark.parametrize("dag_id", ["payouts_overwrite", "payouts_merge"])
def test_dags_test_with_policy_from_conf(
    airflow_home: Path, warehouse: Any, dag_id: str, tmp_path: Path
) -> None:
    """A run's conf {"policy_version": "v2"} overrides the DAG param and reaches the SQL bound."""
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    simulate_crash(warehouse.engine, DAY, rows=1247)  # the DAG's CREATE TABLE task must keep this table
    # A history store of this test's own: with the session's, the other strategy's identical write of
    # the day would make this one unchanged, and an unchanged window emits no asset event.
    history = {
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY": json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "h.db")})
    }
    airflow("dags", "test", dag_id, DAY.isoformat(), "--conf", '{"policy_version": "v2"}', env=history)
    assert window_totals(warehouse.engine, "payouts", DAY) == day_truth(DAY, "v2")
    extra = latest_asset_event_extra("idempotent://warehouse/payouts")
    assert extra["window"] == "2026-08-25" and extra["policy_version"] == "v2"
    assert extra["strategy"] == ("merge" if dag_id == "payouts_merge" else "overwrite")
    assert isinstance(extra["ordinal"], int) and isinstance(extra["dataset_version"], int)


def latest_asset_event_extra(uri: str) -> dict[str, Any]:
    """Read Airflow's own metadata DB (test only): the extra of the newest event of the asset."""
    engine = sa.create_engine(os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                "WHERE a.uri = :uri ORDER BY e.id DESC LIMIT 1"
            ),
            {"uri": uri},
        ).first()
    engine.dispose()
    assert row is not None, f"no asset event for {uri}"
    return row[0] if isinstance(row[0], dict) else json.loads(row[0])


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_templated_window_path(airflow_home: Path, warehouse: Any) -> None:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    simulate_crash(warehouse.engine, DAY, rows=1247)
    airflow("dags", "test", "payouts_templated", DAY.isoformat(), dags=REPO / "tests" / "dags")
    assert window_totals(warehouse.engine, "payouts", DAY) == day_truth(DAY)

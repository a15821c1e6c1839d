"""Which code wrote each window: real DAG runs (`airflow dags test`) before and after the DAG changes.

A DAG file is written, a day is written and rerun, the file is changed in a way that touches
neither the SQL nor the parameters (its description: Airflow makes a new DAG version of it), and
the day is previewed and rerun. History must name two DAG versions (Airflow's numbers 1 and 2, as
its metadata database has them), skip_if_unchanged must write again under the new version, the
preview must say the version differs; and the asset events Airflow registered must be one per
change of the window's content: the first write only, since every later run reproduces the
scenario's v1 payouts of the day (its figures from the formula).
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

from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals
from airflow_idempotent.guard.diff import WindowDiff
from airflow_idempotent.guard.results import GuardedResult
from airflow_idempotent.identity import table_version, with_counts
from tests.test_dagrun import airflow
from tests.test_operators import DAY, day_truth

pytestmark = pytest.mark.dagrun

URI = "idempotent://warehouse/payouts"
CLI = str(Path(sys.executable).with_name("airflow-idempotent"))

DAG_FILE = """
import pendulum
from airflow.sdk import DAG

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="{dag_id}",
    description="{description}",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
    catchup=False,
    params={{"policy_version": "v1"}},
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id="warehouse",
        table="payouts",
        partition_column="sale_date",
        granularity="day",
        sql=PAYOUT_SQL,
        parameters={{"policy_version": "{{{{ params.policy_version }}}}"}},
        skip_if_unchanged=True,
    )
"""


def write_dag(folder: Path, dag_id: str, description: str) -> None:
    (folder / f"{dag_id}.py").write_text(DAG_FILE.format(dag_id=dag_id, description=description))


def metadata(sql: str, **binds: Any) -> list[Any]:
    """Airflow's own metadata DB (test only): what Airflow recorded, to compare with history."""
    engine = sa.create_engine(os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), binds).all())
    finally:
        engine.dispose()


def event_count() -> int:
    return metadata(
        "SELECT count(*) FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.uri = :uri", uri=URI
    )[0][0]


def cli(*args: str, env: dict[str, str]) -> Any:
    proc = subprocess.run(
        [CLI, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode in (0, 3), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


# One warehouse: the DAG version is read from Airflow and kept by the history store, whatever the
# warehouse (the same test on SQLite and DuckDB gave the same records, at a minute each of the
# dagrun group's time); the warehouse-side skip and rewrite are the operators' tests' subject.
@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_a_new_dag_version_is_recorded_rewrites_and_is_previewed(
    airflow_home: Path, warehouse: Any, tmp_path: Path
) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    history = tmp_path / "history.db"
    env = {
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY": json.dumps({"conn_type": "sqlite", "host": str(history)}),
        # Airflow skips re-serialising a DAG written less than 30 s ago: on a quick machine the
        # second version would not be recorded before the preview asks for it.
        "AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL": "0",
    }
    os.environ.update(env)  # the CLI and this process read the same history and DAGs folder
    try:
        # a DAG of its own per engine: Airflow's metadata DB is the session's, its versions start at 1
        run_scenario(warehouse, dags, env, f"code_identity_{warehouse.kind}")
    finally:
        for key in env:
            os.environ.pop(key, None)


def run_scenario(warehouse: Any, dags: Path, env: dict[str, str], dag_id: str) -> None:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    events_before = event_count()
    write_dag(dags, dag_id, "first version")
    warehouse.engine.dispose()  # DuckDB: one process may hold the file; the run's task needs it
    airflow("dags", "test", dag_id, DAY.isoformat(), dags=dags, env=env)  # written, v1
    airflow("dags", "test", dag_id, DAY.isoformat(), dags=dags, env=env)  # skipped: same code, same rows
    assert window_totals(warehouse.engine, "payouts", DAY) == day_truth(DAY)
    warehouse.engine.dispose()
    assert event_count() - events_before == 1  # the first write only: the skip changed nothing

    write_dag(dags, dag_id, "second version: same SQL, same parameters")
    airflow("dags", "reserialize", dags=dags, env=env)  # Airflow records version 2 before any run
    preview = cli("rerun", "--dag", dag_id, "--window", DAY.isoformat(), "--dry-run", "--json", env=env)
    code = preview["tasks"][0]["code"]
    assert code["differs"] is True and code["changed_periods"] == ["2026-08-25"], json.dumps(preview)
    assert code["written_by"]["2026-08-25"]["dag_version_number"] == 1
    assert code["latest"]["dag_version_number"] == 2
    assert any("DAG version changed" in r for r in preview["tasks"][0]["reasons"])

    airflow("dags", "test", dag_id, DAY.isoformat(), dags=dags, env=env)  # new version: writes again
    warehouse.engine.dispose()
    assert window_totals(warehouse.engine, "payouts", DAY) == day_truth(DAY)
    # the rewrite under version 2 reproduced the rows: still the first write's event only
    assert event_count() - events_before == 1

    versions = metadata(
        "SELECT CAST(id AS VARCHAR(36)), version_number FROM dag_version WHERE dag_id = :d", d=dag_id
    )
    number_of = {str(i).replace("-", ""): n for i, n in versions}
    assert sorted(number_of.values()) == [1, 2]

    doc = cli("history", "--dag", dag_id, "--json", env=env)
    writes = doc["windows"][0]["writes"]
    got = [
        (w["status"], w["dataset_version"], w["dag_version_number"], w["bundle_name"], w["policy_version"])
        for w in writes
    ]
    assert got == [
        ("written", 1, 1, "dags-folder", "v1"),
        ("skipped", 1, 1, "dags-folder", "v1"),
        ("written", 1, 2, "dags-folder", "v1"),  # same rows, new code: a write, no new dataset version
    ]
    for w in writes:  # the recorded id is Airflow's, and its number is the one Airflow gave it
        assert number_of[w["dag_version_id"].replace("-", "")] == w["dag_version_number"]
    assert writes[0]["fingerprint"] == writes[1]["fingerprint"] != writes[2]["fingerprint"]


def test_a_table_versions_note_is_kept_beside_a_message_and_read_back() -> None:
    """A guarded write's message and the table format's version share the record's one field."""
    diff = WindowDiff(10, 10, 0, 0, 3, 7)
    result = GuardedResult.committed(
        "swap", diff, "10:99", 10, None, deleted=10, inserted=10, table_version=42
    )
    fields = with_counts("approved by ana", result)
    assert fields["message"] == "approved by ana; table version 42"
    assert (fields["rows_deleted"], fields["rows_inserted"], fields["checksum"]) == (10, 10, "10:99")
    assert table_version(fields["message"]) == 42
    assert with_counts(None, result)["message"] == "table version 42"
    plain = GuardedResult.committed("swap", diff, "10:99", 10, None, deleted=1, inserted=1)
    assert with_counts(None, plain)["message"] is None and table_version(None) is None
    assert table_version("replay reproduced the recorded checksum 2000:1") is None

"""OpenLineage through a real `airflow dags test`: the provider's listener, its file transport.

The payouts DAG's overwrite of 2026-08-25 must report `sales` as input and `payouts` as output,
with the window and the day's 2,000 rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent.examples.payouts import create_payouts, create_sales
from airflow_idempotent.lineage import WINDOW_FACET
from tests.test_dagrun import airflow
from tests.test_operators import DAY

pytest.importorskip("airflow.providers.openlineage")
pytestmark = pytest.mark.dagrun


def lineage_events(path: Path) -> list[dict[str, Any]]:
    """Every event the file transport wrote (one JSON document per line, appended)."""
    files = sorted(path.parent.glob(f"{path.name}*"))
    assert files, f"no OpenLineage file under {path.parent}"
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_overwrite_reports_window_rows_and_tables(airflow_home: Path, warehouse: Any, tmp_path: Path) -> None:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    ol = tmp_path / "ol"
    transport = {"type": "file", "log_file_path": str(ol), "append": True}
    airflow(
        "dags",
        "test",
        "payouts_overwrite",
        DAY.isoformat(),
        env={
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
            "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "30",  # the default 10 s is short on a loaded machine
        },
    )
    events = lineage_events(ol)
    complete = [
        e
        for e in events
        if e.get("eventType") == "COMPLETE" and e["job"]["name"] == "payouts_overwrite.write_payouts"
    ]
    assert len(complete) == 1, [(e.get("eventType"), e["job"]["name"]) for e in events]
    event = complete[0]
    (output,) = event["outputs"]
    database = warehouse.engine.url.database
    assert output["name"] == f"{database}.public.payouts"
    assert output["namespace"].startswith("postgres://")
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 2000
    partitions = output["outputFacets"]["subset"]["outputCondition"]["partitions"]
    assert partitions == [{"dimensions": {"sale_date": DAY.isoformat()}}]
    assert [i["name"] for i in event["inputs"]] == [f"{database}.public.sales"]
    assert event["inputs"][0]["namespace"] == output["namespace"]

    window = event["run"]["facets"][WINDOW_FACET]
    assert window["window"] == DAY.isoformat() == "2026-08-25"
    assert window["windowStart"] == "2026-08-25T00:00:00+00:00"
    assert window["windowEnd"] == "2026-08-26T00:00:00+00:00"
    assert window["strategy"] == "overwrite" and window["policyVersion"] == "v1"
    assert window["rowsInserted"] == 2000 and isinstance(window["ordinal"], int)
    # the window's checksum is "v2:<rows>:<sum>" (docs/checksum.md): its row count is the window's
    assert window["checksum"].split(":")[:2] == ["v2", "2000"] and len(window["fingerprint"]) == 64
    assert output["facets"]["version"]["datasetVersion"] == str(window["datasetVersion"])
    # The provider sets the run's nominalTime from the DAG run's data interval, which a cron
    # @daily run has with no width: it starts where the window starts.
    assert event["run"]["facets"]["nominalTime"]["nominalStartTime"].startswith("2026-08-25T00:00:00")

"""The OpenLineage facets of a window write, built without Airflow running (airflow_idempotent.lineage).

The real events, through the provider's listener and file transport, are in test_lineage_dagrun.py.
"""

from __future__ import annotations

import json
from typing import Any

import pendulum
import pytest

pytest.importorskip("airflow.providers.openlineage")

from airflow.providers.openlineage.sqlparser import DatabaseInfo
from airflow.sdk import Connection
from openlineage.client.serde import Serde

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.lineage import WINDOW_FACET, Naming, input_tables, naming, window_lineage
from airflow_idempotent.lint.sql import parse_one_statement
from airflow_idempotent.window import Window

DAY = Window(
    pendulum.datetime(2026, 8, 25, tz="UTC"), pendulum.datetime(2026, 8, 26, tz="UTC"), source="partition_key"
)
PG = Naming(DatabaseInfo(scheme="postgres", authority="db.example:5432", database="wh"), "public")
GUARDED_RESULT = {
    "strategy": "overwrite",
    "table": "payouts",
    "window": "2026-08-25",
    "semantics": "corrective",
    "policy_version": "v2",
    "fingerprint": "f" * 64,
    "rows_deleted": 2000,
    "rows_inserted": 2000,
    "rows_updated": 0,
    "row_count": 2000,
    "checksum": "2000:abc",
    "ordinal": 3,
    "dataset_version": 7,
    "diff": {
        "rows_before": 2000,
        "rows_after": 2000,
        "row_delta": 0,
        "added": 0,
        "removed": 0,
        "changed": 412,
        "unchanged": 1588,
        "measures": {"amount_eur": {"before": 299730.0, "after": 297000.5, "delta": -2729.5}},
    },
}


def payouts_lineage(table: str = "payouts", strategy: str = "overwrite", **kwargs: Any) -> Any:
    """The lineage of a write of the scenario's SELECT into `table` for 2026-08-25 (PostgreSQL naming)."""
    return window_lineage(
        naming=PG,
        query=parse_one_statement(PAYOUT_SQL, "postgres"),
        sql=PAYOUT_SQL,
        table=table,
        partition_column="sale_date",
        window=DAY,
        strategy=strategy,
        **kwargs,
    )


def as_json(obj: Any) -> dict[str, Any]:
    return json.loads(Serde.to_json(obj))


def test_input_tables_skip_ctes_and_keep_schemas() -> None:
    query = parse_one_statement(
        "WITH day AS (SELECT * FROM sales WHERE sale_date >= :window_start) "
        "SELECT d.sale_id FROM day d JOIN ref.rates r ON r.k = d.k JOIN sales s ON s.sale_id = d.sale_id",
        "postgres",
    )
    assert input_tables(query) == [(None, None, "sales"), (None, "ref", "rates")]


def test_guarded_write_facets() -> None:
    lineage = payouts_lineage(partition_key="2026-08-25T00:00:00", result=GUARDED_RESULT)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [
        ("postgres://db.example:5432", "wh.public.sales")
    ]
    (out,) = lineage.outputs
    assert (out.namespace, out.name) == ("postgres://db.example:5432", "wh.public.payouts")
    facets = as_json(out)
    assert facets["outputFacets"]["outputStatistics"]["rowCount"] == 2000
    condition = facets["outputFacets"]["subset"]["outputCondition"]
    assert condition["type"] == "partition"
    assert condition["partitions"] == [
        {"dimensions": {"sale_date": "2026-08-25"}, "identifier": "2026-08-25T00:00:00"}
    ]
    assert facets["facets"]["version"]["datasetVersion"] == "7"
    runs = {k: as_json(v) for k, v in lineage.run_facets.items()}
    assert runs["nominalTime"]["nominalStartTime"] == "2026-08-25T00:00:00+00:00"
    assert runs["nominalTime"]["nominalEndTime"] == "2026-08-26T00:00:00+00:00"  # end exclusive
    window = runs[WINDOW_FACET]
    assert {k: window[k] for k in ("strategy", "window", "ordinal", "datasetVersion", "checksum")} == {
        "strategy": "overwrite",
        "window": "2026-08-25",
        "ordinal": 3,
        "datasetVersion": 7,
        "checksum": "2000:abc",
    }
    assert window["fingerprint"] == "f" * 64 and window["policyVersion"] == "v2"
    assert window["semantics"] == "corrective" and window["partitionKey"] == "2026-08-25T00:00:00"
    assert window["windowStart"] == "2026-08-25T00:00:00+00:00"
    assert window["windowEnd"] == "2026-08-26T00:00:00+00:00"
    # the diff's counts only: no measure totals (business figures), no sample keys
    assert window["diff"] == {
        "rows_before": 2000,
        "rows_after": 2000,
        "added": 0,
        "removed": 0,
        "changed": 412,
        "unchanged": 1588,
    }
    assert "299730" not in json.dumps(runs)
    assert lineage.job_facets["sql"].query.strip().upper().startswith("SELECT")


def test_failed_write_has_no_statistics() -> None:
    lineage = payouts_lineage("analytics.payouts", "merge", policy_version="v1", semantics="replay")
    (out,) = lineage.outputs
    assert out.name == "wh.analytics.payouts"
    assert "outputStatistics" not in out.outputFacets and "version" not in (out.facets or {})
    window = as_json(lineage.run_facets[WINDOW_FACET])
    assert (
        window["strategy"] == "merge" and window["policyVersion"] == "v1" and window["semantics"] == "replay"
    )
    assert "ordinal" not in window and "diff" not in window  # None is left out of the event


@pytest.mark.parametrize(
    ("conn", "namespace", "name"),
    [
        (
            Connection(conn_id="w", conn_type="postgres", host="127.0.0.1", port=5432, schema="wh"),
            "postgres://127.0.0.1:5432",
            "wh.public.payouts",
        ),
        (
            Connection(conn_id="w", conn_type="sqlite", host="/data/wh.db"),
            "sqlite:///data/wh.db",
            "main.payouts",
        ),
        (
            Connection(conn_id="w", conn_type="mysql", host="maria", port=3306, schema="wh"),
            "mysql://maria:3306",
            "wh.payouts",
        ),
    ],
)
def test_naming_per_connection(conn: Connection, namespace: str, name: str) -> None:
    """PostgreSQL through its provider hook (the default schema read from the database, or public when
    it cannot be asked); the others by the OpenLineage naming spec."""
    dataset = naming(conn).dataset(None, "payouts")
    assert (dataset.namespace, dataset.name) == (namespace, name)

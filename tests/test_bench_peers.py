"""bench/bench_peers.py without the peers' venvs: its result check on real PostgreSQL, and the dbt and
SQLMesh models it generates computing the scenario's known truth on real PostgreSQL. (With
bench/.venvs/dbt present, dbt itself also parses the generated project.)"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlglot
import yaml
from jinja2 import Environment

from tests.conftest import PG_HOST, PG_PORT, PG_USER

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import bench_peers  # noqa: E402
import peer_tools  # noqa: E402
import write_scenario  # noqa: E402

DAY = dt.date(2026, 8, 25)
# docs/contributing.md, The payouts scenario, "Known truth": the window 2026-08-25 under v1.
TRUTH = (2000, Decimal("299730.00"))


@pytest.fixture(scope="module")
def scenario_db() -> Iterator[write_scenario.Pg]:
    """A database of its own holding the scenario's month of sales and its v1 payouts for every day."""
    from airflow_idempotent.examples.payouts import create_payouts, create_sales

    pg = write_scenario.Pg(PG_HOST, PG_PORT, PG_USER, f"idem_test_peers_{secrets.token_hex(4)}")
    admin = pg.connect(db="postgres", autocommit=True)
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{pg.db}"')
    try:
        engine = write_scenario.engine_for(pg)
        assert create_sales(engine) == 60_000
        create_payouts(engine)
        engine.dispose()
        conn = pg.connect()
        with conn, conn.cursor() as cur:
            cur.execute(
                write_scenario.hand_sql()["insert"],
                {
                    "window_start": dt.date(2026, 8, 1),
                    "window_end": dt.date(2026, 9, 1),
                    "policy_version": "v1",
                },
            )
        conn.close()
        yield pg
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{pg.db}" WITH (FORCE)')
        admin.close()


def totals(pg: write_scenario.Pg, table: str = "payouts") -> tuple[dict[dt.date, Any], dict[dt.date, Any]]:
    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            return bench_peers.expected_totals(cur), bench_peers.day_totals(cur, "public", table)
    finally:
        conn.close()


def test_result_check_on_postgres(scenario_db: write_scenario.Pg) -> None:
    expected, got = totals(scenario_db)
    assert expected[DAY] == TRUTH and len(expected) == 30
    assert bench_peers.mismatches(expected, got) == []
    conn = scenario_db.connect()
    with (
        conn,
        conn.cursor() as cur,
    ):  # on a copy: a cent more on one row of the window, a row less the next day
        cur.execute("CREATE TABLE payouts_copy AS SELECT * FROM payouts")
        cur.execute("UPDATE payouts_copy SET amount_eur = amount_eur + 0.01 WHERE sale_id = 48001")
        cur.execute("DELETE FROM payouts_copy WHERE sale_id = 50001")
    conn.close()
    expected, got = totals(scenario_db, "payouts_copy")
    want = expected[dt.date(2026, 8, 26)][1]
    # sale 50001: price 25 + ((50001 * 37) % 900) * 0.5 = 293.50, payout round(293.50 * 0.60, 2) = 176.10
    assert bench_peers.mismatches(expected, got) == [
        "2026-08-25: 2,000 rows / 299730.01 instead of 2,000 rows / 299730.00",
        f"2026-08-26: 1,999 rows / {want - Decimal('176.10')} instead of 2,000 rows / {want}",
    ]
    conn = scenario_db.connect()
    with conn, conn.cursor() as cur:  # a day the source does not have
        cur.execute("UPDATE payouts_copy SET sale_date = '2026-09-30' WHERE sale_id = 1")
    conn.close()
    assert "2026-09-30: 1 rows" in " ".join(bench_peers.mismatches(*totals(scenario_db, "payouts_copy")))


def run_select(pg: write_scenario.Pg, sql: str) -> tuple[int, Decimal]:
    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT count(*), sum(amount_eur) FROM ({sql}) p")
            count, total = cur.fetchone()
    finally:
        conn.close()
    return int(count), Decimal(total)


def test_generated_dbt_models_compute_the_known_truth(scenario_db: write_scenario.Pg, tmp_path: Path) -> None:
    project = peer_tools.write_dbt_project(tmp_path, scenario_db)
    assert yaml.safe_load((project / "dbt_project.yml").read_text())["profile"] == "idem_peers"
    profile = yaml.safe_load((project / "profiles.yml").read_text())["idem_peers"]["outputs"]["bench"]
    assert profile["dbname"] == scenario_db.db and profile["schema"] == peer_tools.DBT_SCHEMA
    sources = yaml.safe_load((project / "models" / "sources.yml").read_text())["sources"][0]
    assert sources["tables"][0]["config"]["event_time"] == "sale_date"
    env = Environment()
    context = {
        "config": lambda **kw: "",
        "source": lambda schema, table: table,
        "var": {"window_start": "2026-08-25", "window_end": "2026-08-26", "policy_version": "v1"}.__getitem__,
    }
    for strategy, model in peer_tools.DBT_MODELS.items():
        text = (project / "models" / f"{model}.sql").read_text()
        assert f"incremental_strategy='{strategy}'" in text
        sql = env.from_string(text).render(**context).strip()
        sqlglot.parse_one(sql, read="postgres")
        if strategy == "microbatch":  # dbt filters the source by event_time: the model has no window
            assert "WHERE" not in sql
            sql += " WHERE s.sale_date = '2026-08-25'"
        assert run_select(scenario_db, sql) == TRUTH, strategy


def test_generated_sqlmesh_models_compute_the_known_truth(
    scenario_db: write_scenario.Pg, tmp_path: Path
) -> None:
    project = peer_tools.write_sqlmesh_project(tmp_path, scenario_db)
    config = yaml.safe_load((project / "config.yaml").read_text())
    assert config["gateways"]["bench"]["connection"]["database"] == scenario_db.db
    for kind, model in peer_tools.SQLMESH_MODELS.items():
        text = (project / "models" / f"{model}.sql").read_text()
        header, query = text.split(");\n", 1)
        assert f"kind {kind} (" in header and f"name {peer_tools.SQLMESH_SCHEMA}.{model}" in header
        sql = (
            query.replace("@start_ds", "'2026-08-25'")
            .replace("@end_ds", "'2026-08-25'")
            .replace("@VAR('policy_version')", f"'{config['variables']['policy_version']}'")
        )
        sqlglot.parse_one(sql, read="postgres")
        assert run_select(scenario_db, sql) == TRUTH, kind


def test_statement_kinds() -> None:
    kind = peer_tools.statement_kind
    assert kind('/* {"app": "dbt"} */\n  create temporary table "x__dbt_tmp" as (select 1)') == (
        "create temp table as select"
    )
    assert kind("delete from t where (sale_id) in (select 1)") == "delete"
    assert kind("MERGE INTO t USING s ON (true) WHEN MATCHED THEN UPDATE SET a = 1") == "merge"
    assert kind("select column_name from information_schema.columns") == "metadata and other"


@pytest.mark.skipif(
    not peer_tools.venv_bin("dbt", "dbt").exists(),
    reason="bench/.venvs/dbt absent (bench_peers.py creates it)",
)
def test_dbt_parses_generated_project(tmp_path: Path) -> None:
    pg = write_scenario.Pg(PG_HOST, PG_PORT, PG_USER, "unused")
    project = peer_tools.write_dbt_project(tmp_path, pg)
    dbt = str(peer_tools.venv_bin("dbt", "dbt"))
    proc = subprocess.run(
        [
            dbt,
            "--no-send-anonymous-usage-stats",
            "parse",
            "--project-dir",
            str(project),
            "--profiles-dir",
            str(project),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    manifest = json.loads((project / "target" / "manifest.json").read_text())
    configs = {n["name"]: n["config"] for n in manifest["nodes"].values() if n["resource_type"] == "model"}
    assert {m: c["incremental_strategy"] for m, c in configs.items()} == {
        model: strategy for strategy, model in peer_tools.DBT_MODELS.items()
    }

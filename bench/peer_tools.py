"""The peers of bench_peers.py: dbt and SQLMesh, each in its own venv under bench/.venvs/<peer>.

What a peer needs to rerun the payouts window: its venv (created from PyPI when missing), the project
generated for it (the scenario's SELECT as its model), one CLI call per rerun, and what its log says
about the statements it ran. Nothing here imports a peer: they run only as their own processes.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import write_scenario

BENCH = Path(__file__).resolve().parent
VENVS = BENCH / ".venvs"
DAY = write_scenario.DAY
DAYS = (DAY - dt.timedelta(days=1), DAY, DAY + dt.timedelta(days=1))
# dbt-core 1.12 depends on a parser package whose build downloads a prebuilt binary from outside
# PyPI (not reachable here), so the last release line installable from PyPI alone is used.
PEER_PACKAGES: dict[str, tuple[str, ...]] = {
    "dbt": ("dbt-core>=1.10,<1.12", "dbt-postgres>=1.9"),
    "sqlmesh": ("sqlmesh[postgres]",),
}
PEER_VERSIONED = {"dbt": ("dbt-core", "dbt-postgres"), "sqlmesh": ("sqlmesh", "psycopg2")}
DBT_SCHEMA = "dbt_bench"
SQLMESH_SCHEMA = "sqlmesh_bench"
DBT_MODELS = {"delete+insert": "dbt_delete_insert", "merge": "dbt_merge", "microbatch": "dbt_microbatch"}
SQLMESH_MODELS = {"INCREMENTAL_BY_TIME_RANGE": "by_time", "INCREMENTAL_BY_UNIQUE_KEY": "by_key"}
WINDOW_FILTER = "WHERE s.sale_date >= :window_start AND s.sale_date < :window_end"


# --------------------------------------------------------------------------------------- the venvs
def venv_bin(peer: str, name: str) -> Path:
    return VENVS / peer / "bin" / name


def ensure_venv(peer: str, log: Callable[[str], None]) -> dict[str, str]:
    """The peer's own venv (created and filled from PyPI when its CLI is missing); its versions."""
    cli = venv_bin(peer, peer)
    if not cli.exists():
        log(f"creating {VENVS / peer} and installing {' '.join(PEER_PACKAGES[peer])} from PyPI")
        subprocess.run([sys.executable, "-m", "venv", str(VENVS / peer)], check=True)
        subprocess.run(
            [str(venv_bin(peer, "python")), "-m", "pip", "install", "--quiet", *PEER_PACKAGES[peer]],
            check=True,
        )
    probe = (
        "import importlib.metadata as m, json, sys; "
        "print(json.dumps({d: m.version(d) for d in sys.argv[1:]}))"
    )
    out = subprocess.run(
        [str(venv_bin(peer, "python")), "-c", probe, *PEER_VERSIONED[peer]],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout))


# ------------------------------------------------------------------------------------ the projects
def dbt_model_sql(strategy: str) -> str:
    """The scenario's SELECT as a dbt incremental model: binds become vars, `sales` a source; the
    microbatch model has no window filter (dbt filters the source by its event_time per batch)."""
    from airflow_idempotent.examples.payouts import PAYOUT_SQL

    assert " FROM sales s " in PAYOUT_SQL and PAYOUT_SQL.endswith(WINDOW_FILTER), PAYOUT_SQL
    sql = PAYOUT_SQL.replace(" FROM sales s ", " FROM {{ source('bench', 'sales') }} s ")
    config = {
        "delete+insert": "incremental_strategy='delete+insert', unique_key='sale_id'",
        "merge": "incremental_strategy='merge', unique_key='sale_id'",
        "microbatch": (
            "incremental_strategy='microbatch', unique_key='sale_id', event_time='sale_date', "
            f"batch_size='day', begin='{DAYS[0].isoformat()}', lookback=0"
        ),
    }[strategy]
    if strategy == "microbatch":  # dbt renders the filtered source as an aliased subquery: wrap it
        sql = sql.removesuffix(" " + WINDOW_FILTER).replace(
            " FROM {{ source('bench', 'sales') }} s", " FROM (SELECT * FROM {{ source('bench', 'sales') }}) s"
        )
    sql = re.sub(r":(window_start|window_end|policy_version)\b", r"'{{ var('\1') }}'", sql)
    return f"{{{{ config(materialized='incremental', {config}) }}}}\n{sql}\n"


def write_dbt_project(root: Path, pg: write_scenario.Pg) -> Path:
    """A dbt project with one incremental model per strategy, writing into schema dbt_bench."""
    project = root / "dbt_project"
    (project / "models").mkdir(parents=True, exist_ok=True)
    (project / "dbt_project.yml").write_text(
        "name: idem_peers\nversion: '1.0'\nconfig-version: 2\nprofile: idem_peers\n"
        "model-paths: [models]\ntarget-path: target\n"
        "flags:\n  send_anonymous_usage_stats: false\n  partial_parse: true\n"
    )
    profile = {
        "type": "postgres",
        "host": pg.host,
        "port": pg.port,
        "user": pg.user,
        "password": "",
        "dbname": pg.db,
        "schema": DBT_SCHEMA,
        "threads": 1,
    }
    (project / "profiles.yml").write_text(
        json.dumps({"idem_peers": {"target": "bench", "outputs": {"bench": profile}}}, indent=2) + "\n"
    )
    sources = {
        "version": 2,
        "sources": [
            {
                "name": "bench",
                "schema": "public",
                "tables": [{"name": "sales", "config": {"event_time": "sale_date"}}],
            }
        ],
    }
    (project / "models" / "sources.yml").write_text(json.dumps(sources, indent=2) + "\n")
    for strategy, model in DBT_MODELS.items():
        (project / "models" / f"{model}.sql").write_text(dbt_model_sql(strategy))
    return project


def sqlmesh_model_sql(kind: str) -> str:
    """The scenario's SELECT as a SQLMesh model: the window from @start_ds/@end_ds (inclusive dates),
    the policy from a project variable, the columns typed as the provider's target declares them."""
    from airflow_idempotent.examples.payouts import PAYOUT_SQL

    assert PAYOUT_SQL.endswith(WINDOW_FILTER), PAYOUT_SQL
    sql = PAYOUT_SQL.removesuffix(WINDOW_FILTER) + "WHERE s.sale_date BETWEEN @start_ds AND @end_ds"
    sql = sql.replace(":policy_version", "@VAR('policy_version')").replace(
        " FROM sales s ", " FROM public.sales s "
    )
    kind_sql = {
        "INCREMENTAL_BY_TIME_RANGE": "INCREMENTAL_BY_TIME_RANGE (time_column sale_date)",
        "INCREMENTAL_BY_UNIQUE_KEY": "INCREMENTAL_BY_UNIQUE_KEY (unique_key sale_id)",
    }[kind]
    return (
        f"MODEL (\n  name {SQLMESH_SCHEMA}.{SQLMESH_MODELS[kind]},\n  kind {kind_sql},\n"
        f"  start '{DAYS[0].isoformat()}',\n  end '{DAYS[-1].isoformat()}',\n  cron '@daily',\n"
        "  grain sale_id,\n"
        "  columns (sale_id BIGINT, sale_date DATE, amount_eur DECIMAL(12,2), rate DECIMAL(4,2))\n);\n"
        f"{sql}\n"
    )


def write_sqlmesh_project(root: Path, pg: write_scenario.Pg) -> Path:
    """A SQLMesh project (state in the same PostgreSQL database) with one model per kind."""
    project = root / "sqlmesh_project"
    (project / "models").mkdir(parents=True, exist_ok=True)
    config = {
        "gateways": {
            "bench": {
                "connection": {
                    "type": "postgres",
                    "host": pg.host,
                    "port": pg.port,
                    "user": pg.user,
                    "password": "",
                    "database": pg.db,
                }
            }
        },
        "default_gateway": "bench",
        "model_defaults": {"dialect": "postgres"},
        "variables": {"policy_version": write_scenario.POLICY},
    }
    (project / "config.yaml").write_text(json.dumps(config, indent=2) + "\n")
    for kind, model in SQLMESH_MODELS.items():
        (project / "models" / f"{model}.sql").write_text(sqlmesh_model_sql(kind))
    return project


# --------------------------------------------------------------------------------------- the calls
@dataclass
class Call:
    """One timed call: wall clock, the write statements alone (when known) and what they were."""

    wall: float
    write: float | None = None
    detail: dict[str, float] = field(default_factory=dict)
    note: str = ""


def dbt_statements(log_file: Path) -> dict[str, float]:
    """Seconds per statement kind from dbt's JSON debug log (SQLQuery, then its SQLQueryStatus)."""
    kinds: dict[str, float] = {}
    last_sql = ""
    for line in log_file.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        name = event.get("info", {}).get("name")
        if name == "SQLQuery":
            last_sql = event["data"].get("sql", "")
        elif name == "SQLQueryStatus":
            kind = statement_kind(last_sql)
            kinds[kind] = kinds.get(kind, 0.0) + float(event["data"]["elapsed"])
    return kinds


WRITE_KINDS = (
    "create temp table as select",
    "delete",
    "insert",
    "delete + insert",
    "merge",
    "create table as select",
)


def statement_kind(sql: str) -> str:
    """A statement's kind, for the write-statement total (data movement) against the rest."""
    s = " ".join(re.sub(r"/\*.*?\*/|--[^\n]*", " ", sql, flags=re.S).split()).lower()
    if s.startswith("delete") and "; insert into" in s:
        return "delete + insert"  # dbt sends its delete+insert as one query
    if s == "commit":
        return "commit"
    if s.startswith("create temporary table") or s.startswith("create temp table"):
        return "create temp table as select"
    if s.startswith("create table") and " as " in s:
        return "create table as select"
    for kind in ("delete", "insert", "merge"):
        if s.startswith(kind):
            return kind
    return "metadata and other"


def dbt_call(project: Path, model: str, strategy: str, run: int) -> Call:
    """One `dbt run` of one model for the window, in its own process; its statements from its log."""
    logs = project / "logs" / f"run_{model}_{run}"
    # The same vars for every model (the microbatch model ignores the window's): dbt's partial parsing
    # starts over whenever they change, which would charge a full parse to every call.
    variables = {"window_start": DAY.isoformat(), "window_end": DAYS[2].isoformat(), "policy_version": "v1"}
    window = ["--event-time-start", DAY.isoformat(), "--event-time-end", DAYS[2].isoformat()]
    if strategy != "microbatch":
        window = []
    cmd = [
        str(venv_bin("dbt", "dbt")),
        "--no-send-anonymous-usage-stats",
        "--no-version-check",
        "--log-format-file",
        "json",
        "--log-level-file",
        "debug",
        "--log-path",
        str(logs),
        "run",
        "--project-dir",
        str(project),
        "--profiles-dir",
        str(project),
        "--select",
        model,
        "--vars",
        json.dumps(variables),
        *window,
    ]
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"dbt run {model} failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
    kinds = dbt_statements(logs / "dbt.log")
    results = json.loads((project / "target" / "run_results.json").read_text())["results"]
    executes = [
        dt.datetime.fromisoformat(t["completed_at"].rstrip("Z"))
        - dt.datetime.fromisoformat(t["started_at"].rstrip("Z"))
        for r in results
        for t in r["timing"]
        if t["name"] == "execute"
    ]
    kinds["run_results execute"] = sum(x.total_seconds() for x in executes)
    kinds["rest of the process (whole - execute)"] = wall - kinds["run_results execute"]
    write = sum(v for k, v in kinds.items() if k in WRITE_KINDS)
    shutil.rmtree(logs, ignore_errors=True)
    return Call(wall, write, kinds)


SQLMESH_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - ")


def sqlmesh_statements(log_dir: Path) -> dict[str, float]:
    """Seconds per statement kind from SQLMesh's --debug log: each 'Executing SQL' line until the next
    log line (millisecond timestamps; SQLMesh logs no duration of its own)."""
    kinds: dict[str, float] = {}
    events: list[tuple[dt.datetime, list[str]]] = []  # (time, the message and its continuation lines)
    for path in sorted(log_dir.glob("*.log")):
        for line in path.read_text().splitlines():
            m = SQLMESH_LINE.match(line)
            if m:
                events.append((dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f"), [line[m.end() :]]))
            elif events:
                events[-1][1].append(line)
    for (at, text), (nxt, _) in itertools.pairwise(events):
        message = "\n".join(text)
        if "Executing SQL:" in message:
            kind = statement_kind(message.split("Executing SQL:", 1)[1])
            kinds[kind] = kinds.get(kind, 0.0) + (nxt - at).total_seconds()
    return kinds


def sqlmesh_call(project: Path, model: str, run: int, debug: bool = False) -> Call:
    """One restatement of the window of one model (`sqlmesh plan --restate-model`), one process."""
    logs = project / "logs" / f"run_{model}_{run}"
    cmd = [
        str(venv_bin("sqlmesh", "sqlmesh")),
        "--paths",
        str(project),
        "--log-file-dir",
        str(logs),
        *(["--debug"] if debug else []),
        "plan",
        "--restate-model",
        f"{SQLMESH_SCHEMA}.{model}",
        "--start",
        DAY.isoformat(),
        "--end",
        DAY.isoformat(),
        "--auto-apply",
        "--no-prompts",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=project, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"sqlmesh plan {model} failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
    backfill = re.search(rf"{SQLMESH_SCHEMA}\.{model}: (\[[^\]]*\])", proc.stdout)
    kinds = sqlmesh_statements(logs) if debug else {}
    evaluated = [int(x) for x in re.findall(r"duration=(\d+)ms", proc.stdout)]
    if evaluated:
        kinds["console: evaluation duration"] = sum(evaluated) / 1000
        kinds["rest of the process (whole - evaluation)"] = wall - sum(evaluated) / 1000
    shutil.rmtree(logs, ignore_errors=True)
    # The log's gaps between lines are no statement timing (other lines interleave): the write is the
    # evaluation duration SQLMesh's console reports for the snapshot (its DELETE/INSERT and checks).
    write = kinds.get("console: evaluation duration") if debug else None
    return Call(wall, write, kinds, f"backfill {backfill.group(1) if backfill else '?'}")


def sqlmesh_initial_plan(project: Path) -> str:
    """The first `sqlmesh plan` of the project: creates the models' tables and backfills the 3 days."""
    proc = subprocess.run(
        [
            str(venv_bin("sqlmesh", "sqlmesh")),
            "--paths",
            str(project),
            "plan",
            "--auto-apply",
            "--no-prompts",
        ],
        capture_output=True,
        text=True,
        cwd=project,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"sqlmesh initial plan failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
    return proc.stdout

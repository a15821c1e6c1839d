"""The reliability suite's recorder, its seed, and (for the e2e part) its own Airflow cluster.

Every case appends one JSON line to ``.pytest_cache/reliability/results.jsonl`` (or the file
named by ``IDEM_RELIABILITY_RESULTS``): suite, case, database, strategy, crash point, seed,
reruns, rows lost, duplicates, outcome, and the measured details. Each pytest session adds a
``session`` line (machine, versions, seed) and a ``session_end`` line (duration). The file is
only appended to: ``make reliability`` deletes it first, then runs the fast part and the e2e
part, then ``tools/reliability_report.py`` turns it into RELIABILITY.md.

The seed of every randomised choice (crash points, the row a kill strikes at, hypothesis) is
``IDEM_RELIABILITY_SEED`` when set, else a fresh one; it is printed and recorded, so a run can
be repeated exactly with ``IDEM_RELIABILITY_SEED=<seed> make reliability``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import MARIADB_HOST, MARIADB_PORT, MARIADB_USER, PG_HOST, PG_PORT, PG_USER
from tests.e2e.conftest import (
    AIRFLOW,
    SERVICES,
    AirflowCluster,
    airflow_env,
    drop_database,
    free_port,
    kill_group,
    pg_admin,
    pytest_sessionfinish,  # noqa: F401 - a hook: drops the metadata templates this process made
)

RESULTS_ENV = "IDEM_RELIABILITY_RESULTS"
SEED_ENV = "IDEM_RELIABILITY_SEED"
_SEED = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**31))


def results_path(root: Path) -> Path:
    configured = os.environ.get(RESULTS_ENV)
    return Path(configured) if configured else root / ".pytest_cache" / "reliability" / "results.jsonl"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "reliability: the reliability suite (tests/reliability): figures for RELIABILITY.md"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of this directory carries the `reliability` marker (`-m "not reliability"` skips it)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.reliability)


def pytest_report_header(config: pytest.Config) -> str:
    return f"reliability: seed {_SEED} (set {SEED_ENV} to repeat), results -> {results_path(config.rootpath)}"


# --------------------------------------------------------------------------------------------
# The machine and the versions, recorded once per session
# --------------------------------------------------------------------------------------------


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _server_version(url: str, query: str) -> str | None:
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            return str(conn.execute(sa.text(query)).scalar_one()).split(" on ")[0]
    except Exception:
        return None
    finally:
        engine.dispose()


def machine() -> dict[str, Any]:
    versions: dict[str, Any] = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version}
    for name in ("airflow", "sqlalchemy", "sqlglot", "duckdb", "hypothesis"):
        with contextlib.suppress(Exception):
            versions[name] = __import__(name).__version__
    versions["postgresql"] = _server_version(
        f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres", "SELECT version()"
    )
    versions["mariadb"] = _server_version(
        f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/", "SELECT version()"
    )
    load = None
    with contextlib.suppress(OSError):
        load = [round(x, 2) for x in os.getloadavg()]
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "load_at_start": load,
        "versions": versions,
    }


# --------------------------------------------------------------------------------------------
# The recorder
# --------------------------------------------------------------------------------------------

#: The fields every case line has (the report reads these); anything else goes in "details".
CASE_FIELDS = (
    "suite",
    "case",
    "database",
    "strategy",
    "crash_point",
    "seed",
    "reruns",
    "rows_lost",
    "duplicates",
    "outcome",
)


@dataclass
class Recorder:
    """Appends one JSON line per case; thread-safe (the load test records from threads)."""

    path: Path
    session: str
    seed: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    count: int = 0

    def write(self, line: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(line, sort_keys=True, default=str)
        with self.lock, self.path.open("a", encoding="utf-8") as out:
            out.write(text + "\n")
            out.flush()

    def record(
        self,
        *,
        suite: str,
        case: str,
        database: str | None,
        strategy: str | None,
        outcome: str,
        crash_point: str | None = None,
        seed: int | None = None,
        reruns: int | None = None,
        rows_lost: int | None = 0,
        duplicates: int | None = 0,
        **details: Any,
    ) -> dict[str, Any]:
        """One case. `outcome` is "ok" when the property held; anything else is a finding."""
        line = {
            "kind": "case",
            "session": self.session,
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "suite": suite,
            "case": case,
            "database": database,
            "strategy": strategy,
            "crash_point": crash_point,
            "seed": self.seed if seed is None else seed,
            "reruns": reruns,
            "rows_lost": rows_lost,
            "duplicates": duplicates,
            "outcome": outcome,
            "details": details,
        }
        self.write(line)
        self.count += 1
        return line


@pytest.fixture(scope="session")
def reliability_seed() -> int:
    return _SEED


@contextlib.contextmanager
def recording(request: pytest.FixtureRequest, seed: int, argv: list[str]) -> Iterator[Recorder]:
    """A test session's recorder, its start and end written around it: the one way a suite
    (this one, tests/spark) puts its cases where tools/reliability_report.py reads them."""
    recorder = Recorder(path=results_path(request.config.rootpath), session=secrets.token_hex(4), seed=seed)
    started = time.monotonic()
    recorder.write(
        {
            "kind": "session",
            "session": recorder.session,
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seed": seed,
            "markexpr": request.config.getoption("markexpr", default="") or "",
            "argv": argv,
            "machine": machine(),
        }
    )
    try:
        yield recorder
    finally:
        recorder.write(
            {
                "kind": "session_end",
                "session": recorder.session,
                "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "seconds": round(time.monotonic() - started, 1),
                "cases": recorder.count,
            }
        )


@pytest.fixture(scope="session")
def reliability(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    """The session's recorder (see the module docstring)."""
    with recording(request, _SEED, sys.argv[1:]) as recorder:
        yield recorder


# --------------------------------------------------------------------------------------------
# The e2e cluster: tests/e2e/conftest.py's harness with this suite's settings
# --------------------------------------------------------------------------------------------

#: Users of the simple auth manager (not all admins: the authorisation checks need a viewer).
USERS = {"admin": "admin", "viewer": "viewer", "op": "op"}
#: Concurrency: enough executor slots for a backfill with max_active_runs 32.
PARALLELISM = int(os.environ.get("IDEM_RELIABILITY_PARALLELISM", "32"))


@pytest.fixture(scope="session")
def reliability_dags(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The DAGs folder of the reliability cluster; modules write their DAG files before asking for it."""
    return tmp_path_factory.mktemp("reliability_dags")


@pytest.fixture(scope="session")
def reliability_cluster(
    tmp_path_factory: pytest.TempPathFactory, reliability_dags: Path
) -> Iterator[ReliabilityCluster]:
    """A fresh scheduler + DAG processor + API server on fresh PostgreSQL databases.

    The same harness as tests/e2e/conftest.py (its AirflowCluster, environment and teardown),
    with: parallelism 32 (and 32 tasks per DAG), the simple auth manager with an admin, an op and
    a viewer (not every user an admin); every other setting is Airflow's default (scheduler
    heartbeat and orphan checks included). `new_warehouse()` gives a module its own database.
    """
    name = f"idem_rel_{secrets.token_hex(6)}"
    history_db = f"{name}_history"
    home = tmp_path_factory.mktemp("reliability_home")
    port = free_port()
    admin = pg_admin()
    metadata_url = f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    env = airflow_env(home, reliability_dags, metadata_url, history_db, port)
    env.update(
        {
            "AIRFLOW__CORE__PARALLELISM": str(PARALLELISM),
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(PARALLELISM),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE": "10",
        }
    )
    cluster = ReliabilityCluster(
        home=home,
        dags=reliability_dags,
        env=env,
        base_url=f"http://127.0.0.1:{port}",
        history_url=f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{history_db}",
        name=name,
    )
    try:
        with admin.connect() as conn:
            for db in (name, history_db):
                conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
        cluster.migrate()
        for service in SERVICES:
            cluster.start(service)
        cluster.wait_serving()
        yield cluster
    finally:
        for proc in [*cluster.processes.values(), *cluster.retired]:
            kill_group(proc)
        for db in (name, history_db, *cluster.warehouses):
            with contextlib.suppress(Exception):
                drop_database(admin, db)
        admin.dispose()


@dataclass
class ReliabilityCluster(AirflowCluster):
    """AirflowCluster with per-user tokens, restartable services and the warehouse's URL."""

    name: str = ""
    retired: list[subprocess.Popen[bytes]] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)
    warehouses: list[str] = field(default_factory=list)

    def new_warehouse(self, suffix: str) -> tuple[str, str]:
        """A fresh PostgreSQL database and the Airflow connection to it: (conn_id, SQLAlchemy URL).

        One per test module, so no module's tables or sources meet another's."""
        db = f"{self.name}_{suffix}"
        admin = pg_admin()
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
                conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
        finally:
            admin.dispose()
        self.warehouses.append(db)
        conn_id = f"idem_rel_{suffix}"
        self.add_postgres_connection(conn_id, db)
        return conn_id, f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{db}"

    def password(self, user: str) -> str:
        generated = self.home / "simple_auth_manager_passwords.json.generated"
        return str(json.loads(generated.read_text())[user])

    def token_for(self, user: str) -> str:
        if user not in self.tokens:
            body = {"username": user, "password": self.password(user)}
            self.tokens[user] = self.request("POST", "/auth/token", body, auth=False)["access_token"]
        return self.tokens[user]

    def token(self) -> str:
        return self.token_for("admin")

    def call_as(
        self, token: str | None, method: str, path: str, body: Any = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        """A request with exactly this Authorization (None: no header), body as JSON or raw bytes."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                status, text = resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as err:
            status, text = err.code, err.read().decode(errors="replace")
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text

    def start(self, service: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start `service` in its own process group, appending to its log."""
        log = (self.home / f"{service}.log").open("ab")
        proc = subprocess.Popen(
            [AIRFLOW, *SERVICES[service]],
            env={**self.env, **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.home,
            start_new_session=True,
        )
        log.close()
        self.processes[service] = proc
        return proc

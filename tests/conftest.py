"""Fixtures for real databases and a real (throw-away) Airflow home.

Every test session gets its own PostgreSQL and MariaDB database (``idem_test_<hex>``) and its own
SQLite / DuckDB files, so concurrent runs never collide. A server that does not answer makes the
tests that need it FAIL with the command that starts it: nothing is skipped silently.

Airflow reads its configuration when it is first imported, so this module points AIRFLOW_HOME (and
the rest of the test configuration) at a session temp dir as soon as pytest loads it, before any
test module can import airflow. The metadata database is only migrated when a test asks for the
``airflow_home`` fixture (it costs several seconds).
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

REPO_ROOT = Path(__file__).resolve().parent.parent

DAGS_FOLDER = REPO_ROOT / "dags"

# Import the package from this work tree even when pytest runs from a venv it is not installed in.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Where the servers are; the environment may point elsewhere (e.g. another local port).
PG_HOST = os.environ.get("IDEM_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("IDEM_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("IDEM_TEST_PG_USER", "postgres")
MARIADB_HOST = os.environ.get("IDEM_TEST_MARIADB_HOST", "127.0.0.1")
MARIADB_PORT = int(os.environ.get("IDEM_TEST_MARIADB_PORT", "3306"))
MARIADB_USER = os.environ.get("IDEM_TEST_MARIADB_USER", "root")

WAREHOUSE_KINDS = ("postgres", "mariadb", "sqlite", "duckdb")

HOW_TO_START = {
    "postgres": (
        f"PostgreSQL at {PG_HOST}:{PG_PORT} (user {PG_USER}, trust auth) is not reachable. Run "
        "`sudo bash tools/machine.sh` (`make test` and `bash .ci/run` run it too): it installs, "
        "configures and starts every service the tests need."
    ),
    "mariadb": (
        f"MariaDB at {MARIADB_HOST}:{MARIADB_PORT} (user {MARIADB_USER}, empty password) is not "
        "reachable. Run `sudo bash tools/machine.sh` (`make test` and `bash .ci/run` run it too): it "
        "installs, configures and starts every service the tests need."
    ),
}

# --------------------------------------------------------------------------------------------
# Airflow configuration: set before anything imports airflow.
# --------------------------------------------------------------------------------------------

_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="idem_airflow_home_"))
AIRFLOW_ENV = {
    "AIRFLOW_HOME": str(_AIRFLOW_HOME),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_AIRFLOW_HOME / 'airflow.db'}",
}
os.environ.update(AIRFLOW_ENV)


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package to bytecode once per session (not again in each xdist worker).

    The venv's packages are compiled at install, but this package is installed editable, and under
    PYTHONDONTWRITEBYTECODE (this machine sets it) every Airflow process the tests start compiled
    from source each module it imported: 16% of a guarded task process's CPU. A .pyc is checked
    against its source's mtime and size at import: an edited module is compiled again, never stale.
    """
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(REPO_ROOT / "airflow_idempotent", quiet=1)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)


#: The longest files of the e2e group, longest first (seconds in the clean-clone run of d6fd646:
#: 348, 270, 184, 144, 116, 92). Under `--dist loadfile` a file is one unit of work handed to the
#: next free worker in collection order: collected alphabetically, the release file (270 s) started
#: last and the group took 560 s on three workers for 447 s of work each.
LONGEST_FIRST = (
    "tests/e2e/test_guarded_month.py",
    "tests/test_release.py",
    "tests/e2e/test_approval.py",
    "tests/e2e/test_ui_browser.py",
    "tests/reliability/test_faults.py",
    "tests/e2e/test_changed_events.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Collect LONGEST_FIRST's files first (stable: each file's tests keep their order)."""
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    root = config.rootpath

    def file_rank(item: pytest.Item) -> int:
        return rank.get(item.path.relative_to(root).as_posix(), len(rank))

    items.sort(key=file_rank)


def _airflow_command() -> list[str]:
    exe = Path(sys.executable).parent / "airflow"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "airflow"]


@pytest.fixture(scope="session")
def airflow_home() -> Iterator[Path]:
    """A migrated, throw-away AIRFLOW_HOME (SQLite metadata DB, DAGs folder = the repo's dags/)."""
    os.environ.update(AIRFLOW_ENV)
    proc = subprocess.run(
        [*_airflow_command(), "db", "migrate"],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"`airflow db migrate` failed (exit {proc.returncode}) for AIRFLOW_HOME={_AIRFLOW_HOME}:\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}",
            pytrace=False,
        )
    yield _AIRFLOW_HOME


# --------------------------------------------------------------------------------------------
# One fresh database per session on each server.
# --------------------------------------------------------------------------------------------


def _fresh_name() -> str:
    return f"idem_test_{secrets.token_hex(6)}"


def _admin_engine(kind: str, url: str) -> Engine:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    error = None
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as exc:
        error = str(exc.orig).strip()
    if error is not None:  # fail outside the except block: no chained traceback, just the fix
        engine.dispose()
        pytest.fail(f"{HOW_TO_START[kind]}\nDriver said: {error}", pytrace=False)
    return engine


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this session, dropped at the end."""
    db = _fresh_name()
    admin = _admin_engine(
        "postgres",
        f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres?connect_timeout=5",
    )
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
    try:
        yield f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{db}"
    finally:
        with admin.connect() as conn:
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :db AND pid <> pg_backend_pid()"
                ),
                {"db": db},
            )
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def mariadb_url() -> Iterator[str]:
    """A fresh MariaDB database for this session, dropped at the end."""
    db = _fresh_name()
    admin = _admin_engine(
        "mariadb",
        f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/?connect_timeout=5",
    )
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4"))
    try:
        yield f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/{db}"
    finally:
        with admin.connect() as conn:
            ids = conn.execute(
                sa.text(
                    "SELECT id FROM information_schema.PROCESSLIST WHERE DB = :db AND id <> CONNECTION_ID()"
                ),
                {"db": db},
            ).scalars()
            for pid in list(ids):
                with contextlib.suppress(sa.exc.DBAPIError):  # it may be gone already
                    conn.execute(sa.text(f"KILL {int(pid)}"))
            conn.execute(sa.text("SET SESSION lock_wait_timeout = 30"))
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{db}`"))
        admin.dispose()


@pytest.fixture(scope="session")
def warehouse_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def sqlite_url(warehouse_dir: Path) -> str:
    return f"sqlite:///{warehouse_dir / 'warehouse.db'}"


@pytest.fixture(scope="session")
def duckdb_url(warehouse_dir: Path) -> str:
    return f"duckdb:///{warehouse_dir / 'warehouse.duckdb'}"


def scratch_tables(url: str, create: Sequence[str], drop: Sequence[str]) -> Iterator[Engine]:
    """For a fixture: an engine on `url` after the `drop` then `create` statements, `drop` again after."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in (*drop, *create):
            conn.execute(sa.text(statement))
    try:
        yield engine
    finally:
        with engine.begin() as conn:
            for statement in drop:
                conn.execute(sa.text(statement))
        engine.dispose()


# --------------------------------------------------------------------------------------------
# The warehouse: one test, one empty database, one Airflow connection `warehouse`.
# --------------------------------------------------------------------------------------------


@dataclass
class Warehouse:
    kind: str  # "postgres" | "mariadb" | "sqlite" | "duckdb"
    url: str
    engine: Engine
    conn_json: str  # the Airflow connection, as JSON for AIRFLOW_CONN_<ID>
    conn_id: str = "warehouse"


def _file_path(url: str) -> str:
    path = sa.engine.make_url(url).database
    assert path, url
    return path


def _conn_json(kind: str, url: str) -> str:
    u = sa.engine.make_url(url)
    if kind == "postgres":
        conn = {
            "conn_type": "postgres",
            "host": PG_HOST,
            "port": PG_PORT,
            "login": PG_USER,
            "schema": u.database,
        }
    elif kind == "mariadb":
        conn = {
            "conn_type": "mysql",
            "host": MARIADB_HOST,
            "port": MARIADB_PORT,
            "login": MARIADB_USER,
            "schema": u.database,
        }
    else:
        conn = {"conn_type": kind, "host": _file_path(url)}
    return json.dumps(conn)


def _drop_everything(kind: str, engine: Engine) -> None:
    """Drop every table, view (and, where they exist, schema and sequence) the test created.

    A history store a test kept in this database goes too, so the process forgets it migrated it."""
    from airflow_idempotent.history.store import HistoryStore

    HistoryStore._MIGRATED_URLS.clear()
    with engine.begin() as conn:
        if kind == "postgres":
            conn.execute(sa.text("SET LOCAL lock_timeout = '30s'"))
            schemas = conn.execute(
                sa.text(
                    "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
                    "AND nspname NOT IN ('information_schema', 'public')"
                )
            ).scalars()
            for schema in list(schemas):
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
            conn.execute(sa.text("DROP SCHEMA public CASCADE"))
            conn.execute(sa.text("CREATE SCHEMA public"))
        elif kind == "mariadb":
            conn.execute(sa.text("SET SESSION lock_wait_timeout = 30"))
            conn.execute(sa.text("SET FOREIGN_KEY_CHECKS = 0"))
            rows = conn.execute(sa.text("SHOW FULL TABLES")).all()
            for name, table_type in rows:
                what = "VIEW" if table_type == "VIEW" else "TABLE"
                conn.execute(sa.text(f"DROP {what} IF EXISTS `{name}`"))
            conn.execute(sa.text("SET FOREIGN_KEY_CHECKS = 1"))
        elif kind == "sqlite":
            rows = conn.execute(
                sa.text(
                    "SELECT type, name FROM sqlite_master "
                    "WHERE type IN ('view', 'table') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                    "ORDER BY type DESC"
                )
            ).all()
            for obj_type, name in rows:
                conn.execute(sa.text(f'DROP {obj_type.upper()} IF EXISTS "{name}"'))
        elif kind == "duckdb":
            rows = conn.execute(
                sa.text(
                    "SELECT table_schema, table_name, table_type FROM information_schema.tables "
                    "WHERE table_catalog = current_database() "
                    "ORDER BY CASE WHEN table_type = 'VIEW' THEN 0 ELSE 1 END"
                )
            ).all()
            for schema, name, table_type in rows:
                what = "VIEW" if table_type == "VIEW" else "TABLE"
                conn.execute(sa.text(f'DROP {what} IF EXISTS "{schema}"."{name}" CASCADE'))
            for (seq,) in conn.execute(
                sa.text(
                    "SELECT schema_name || '.' || sequence_name FROM duckdb_sequences() WHERE NOT temporary"
                )
            ).all():
                conn.execute(sa.text(f"DROP SEQUENCE IF EXISTS {seq} CASCADE"))
            schemas = conn.execute(
                sa.text(
                    "SELECT schema_name FROM duckdb_schemas() "
                    "WHERE database_name = current_database() AND NOT internal AND schema_name <> 'main'"
                )
            ).scalars()
            for schema in list(schemas):
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        else:  # pragma: no cover
            raise ValueError(kind)


_URL_FIXTURE = {
    "postgres": "pg_url",
    "mariadb": "mariadb_url",
    "sqlite": "sqlite_url",
    "duckdb": "duckdb_url",
}


@pytest.fixture(params=WAREHOUSE_KINDS)
def warehouse(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Warehouse]:
    """An empty warehouse database of each kind, exposed to Airflow as connection `warehouse`."""
    kind: str = request.param
    url: str = request.getfixturevalue(_URL_FIXTURE[kind])
    engine = sa.create_engine(url)
    wh = Warehouse(kind=kind, url=url, engine=engine, conn_json=_conn_json(kind, url))
    monkeypatch.setenv(f"AIRFLOW_CONN_{wh.conn_id.upper()}", wh.conn_json)
    try:
        _drop_everything(kind, engine)  # a crashed earlier teardown must not leak into this test
        yield wh
    finally:
        try:
            _drop_everything(kind, engine)
        finally:
            engine.dispose()

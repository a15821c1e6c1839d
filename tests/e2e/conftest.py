"""A real Airflow deployment for end-to-end tests: scheduler, DAG processor and API server.

Each test session that asks for `airflow_cluster` gets a fresh PostgreSQL metadata database
(`idem_e2e_<hex>`; SQLite metadata cannot run backfills next to a scheduler), a fresh PostgreSQL
history database (`idem_e2e_<hex>_history`, the `idempotent_history` connection), a temporary
AIRFLOW_HOME and DAGs folder, LocalExecutor, and the simple auth manager with every user an admin.
Every process is started in its own process group, and every group is killed (TERM, then KILL)
and both databases dropped at the end, whatever happened.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.testing.ports import free_port
from tests.conftest import HOW_TO_START, PG_HOST, PG_PORT, PG_USER, REPO_ROOT

SCREENSHOTS = REPO_ROOT / "docs" / "screenshots"
CHROMIUM = os.environ.get("IDEM_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
#: How long an Airflow service may take to start serving. On a quiet 2-core machine the API server
#: answers in ~20 s; with three other deployments starting beside it on a VM whose CPUs are lent out
#: (CPU steal) it took over 120 s in a clean-clone run while alive, so the wait is generous: a dead
#: process still fails at once (`check_alive`).
SERVER_START_TIMEOUT = 300.0
SERVICES = {
    "api-server": ["api-server", "--workers", "1"],
    "scheduler": ["scheduler"],
    "dag-processor": ["dag-processor"],
}


def pg_admin() -> sa.Engine:
    engine = sa.create_engine(
        f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres?connect_timeout=5",
        isolation_level="AUTOCOMMIT",
    )
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as exc:
        engine.dispose()
        pytest.fail(f"{HOW_TO_START['postgres']}\nDriver said: {str(exc.orig).strip()}", pytrace=False)
    return engine


def drop_database(admin: sa.Engine, name: str) -> None:
    with admin.connect() as conn:
        conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :db AND pid <> pg_backend_pid()"
            ),
            {"db": name},
        )
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextlib.contextmanager
def warehouse_database(
    cluster: AirflowCluster,
    suffix: str,
    conn_id: str,
    dag_ids: tuple[str, ...],
    fill: Callable[[sa.Engine], object],
) -> Iterator[sa.Engine]:
    """A fresh PostgreSQL database as the cluster's connection `conn_id`, filled by `fill`, the DAGs
    unpaused once parsed; afterwards the DAGs paused, their open backfills cancelled (other modules
    share the cluster) and the database dropped, whatever happened."""
    name = f"idem_e2e_{secrets.token_hex(6)}_{suffix}"
    admin = pg_admin()
    engine = sa.create_engine(f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        fill(engine)
        cluster.add_postgres_connection(conn_id, name)
        for dag_id in dag_ids:
            cluster.wait_for(
                f"{dag_id} to be parsed",
                lambda d=dag_id: cluster.request("GET", f"/api/v2/dags/{d}"),
                SERVER_START_TIMEOUT,
                1,
            )
            cluster.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        yield engine
    finally:
        for dag_id in reversed(dag_ids):
            quiet(cluster, dag_id)
        engine.dispose()
        try:
            drop_database(admin, name)
        finally:
            admin.dispose()


#: PostgreSQL advisory lock held while a metadata template is made, copied or dropped: PostgreSQL
#: refuses to copy a database another session is connected to, and the xdist workers share them.
TEMPLATE_LOCK = 0x1DE2E50
#: The templates this process made, dropped when its session ends (`pytest_sessionfinish`).
TEMPLATES_MADE: set[str] = set()


def template_name(env: dict[str, str]) -> str:
    """The migrated metadata database a deployment with `env` is copied from: one per installed
    Airflow distribution versions and per setting that changes what `airflow db migrate` creates
    (the auth manager's and the external DB managers' tables, the log template rows)."""
    versions = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in importlib.metadata.distributions()
        if (d.metadata["Name"] or "").lower().startswith("apache-airflow")
    )
    settings = sorted(
        f"{k}={v}"
        for k, v in env.items()
        if (k.startswith(("AIRFLOW__DATABASE__", "AIRFLOW__LOGGING__")) and "SQL_ALCHEMY" not in k)
        or k in ("AIRFLOW__CORE__AUTH_MANAGER", "PYTHONPATH")
    )
    digest = hashlib.sha256("\n".join([*versions, *settings]).encode()).hexdigest()[:16]
    return f"idem_e2e_template_{digest}"


def copy_migrated(env: dict[str, str], database: str) -> None:
    """`database` (re)created as a copy of a database `airflow db migrate` migrated with `env`.

    `airflow db migrate` cost a deployment 4.6 CPU-s and 7-16 s of wall on this machine, once for
    each of the e2e group's deployments; a copy (CREATE DATABASE ... TEMPLATE) takes 0.2 s. The
    template is migrated under another name and renamed when done, so a run killed mid-migration
    leaves no half-migrated template for the next one to copy."""
    template = template_name(env)
    admin = pg_admin()
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": TEMPLATE_LOCK})
            try:
                found = conn.execute(
                    sa.text("SELECT 1 FROM pg_database WHERE datname = :t"), {"t": template}
                ).first()
                if found is None:
                    making = f"{template}_making"
                    conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{making}" WITH (FORCE)'))
                    conn.execute(sa.text(f'CREATE DATABASE "{making}"'))
                    url = f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{making}"
                    migrate(env | {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url})
                    conn.execute(sa.text(f'ALTER DATABASE "{making}" RENAME TO "{template}"'))
                    TEMPLATES_MADE.add(template)
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
                conn.execute(sa.text(f'CREATE DATABASE "{database}" TEMPLATE "{template}"'))
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": TEMPLATE_LOCK})
    finally:
        admin.dispose()


def migrate(env: dict[str, str]) -> None:
    """`airflow db migrate` with `env` (fails the test on an error)."""
    done = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"airflow db migrate failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the metadata templates this process made (another worker still copying holds the lock)."""
    if not TEMPLATES_MADE:
        return
    admin = pg_admin()
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": TEMPLATE_LOCK})
            try:
                for template in sorted(TEMPLATES_MADE):
                    conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)'))
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": TEMPLATE_LOCK})
        TEMPLATES_MADE.clear()
    finally:
        admin.dispose()


def quiet(cluster: AirflowCluster, dag_id: str) -> None:
    """Leave the session's cluster as other modules expect it: the DAG paused, no backfill open."""
    try:
        cluster.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": True})
        status, answer = cluster.call("GET", f"/api/v2/backfills?dag_id={dag_id}&limit=100")
        for b in answer.get("backfills", []) if status == 200 else []:
            if b["completed_at"] is None:
                cluster.call("PUT", f"/api/v2/backfills/{b['id']}/cancel")
    except Exception as err:  # the cluster may be gone already: its fixture kills it anyway
        print(f"could not quiet the cluster: {err}")


def kill_group(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """TERM the process group this test started, then KILL whatever is left of it, and of every
    process it started in a session of its own (the executor's task runners do that, so the group
    alone misses them: a runner left behind keeps retrying a server that is gone)."""
    import psutil

    pgid = proc.pid  # started with start_new_session=True: its own group, led by it
    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)  # the leader may be gone while its children linger
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for child in descendants:  # those in sessions of their own
        with contextlib.suppress(psutil.Error):
            child.kill()
    # A descendant gone between the listing and the wait is what is waited for; psutil's wait may
    # then raise the pidfd's FileNotFoundError instead of NoSuchProcess (a teardown error in the e2e
    # group's run of 9e575ef+6e71ae3, every test passed).
    with contextlib.suppress(psutil.Error, OSError):
        psutil.wait_procs(descendants, timeout=5)


@dataclass
class AirflowCluster:
    home: Path
    dags: Path
    env: dict[str, str]
    base_url: str
    history_url: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _token: str | None = None

    def log(self, name: str, tail: int = 3000) -> str:
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"===== {name} =====\n{self.log(name)}" for name in SERVICES)

    def check_alive(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise AssertionError(f"airflow {name} exited with {proc.returncode}:\n{self.log(name)}")

    def token(self) -> str:
        """POST /auth/token: with simple_auth_manager_all_admins any credentials give an admin JWT."""
        if self._token is None:
            body = {"username": "admin", "password": "admin"}
            self._token = self.request("POST", "/auth/token", body, auth=False)["access_token"]
        return self._token

    def request(
        self, method: str, path: str, body: Any = None, auth: bool = True, timeout: float = 30
    ) -> Any:
        """The JSON answer of a request that must succeed (an HTTP error fails the test)."""
        status, answer = self.call(method, path, body, auth, timeout)
        if status >= 400:
            raise AssertionError(f"{method} {path} -> {status}: {json.dumps(answer)[:2000]}")
        return answer

    def call(
        self, method: str, path: str, body: Any = None, auth: bool = True, timeout: float = 30
    ) -> tuple[int, Any]:
        """The status and the answer (JSON, else text, else None) of a request, whatever the status."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, text = resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            status, text = err.code, err.read().decode()
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text

    def add_postgres_connection(self, conn_id: str, database: str) -> None:
        """The Airflow connection `conn_id` to a database of the local PostgreSQL (POST /connections)."""
        connection = {
            "connection_id": conn_id,
            "conn_type": "postgres",
            "host": PG_HOST,
            "port": PG_PORT,
            "login": PG_USER,
            "schema": database,
        }
        self.request("POST", "/api/v2/connections", connection)

    def migrate(self) -> None:
        """This deployment's metadata database as `airflow db migrate` leaves it: a copy of a template
        migrated once per session and setting (`copy_migrated`), not a migration per deployment."""
        copy_migrated(
            self.env, sa.engine.make_url(self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).database or ""
        )

    def start(self, service: str, args: list[str]) -> None:
        """`airflow <args>` as `service`, its output in <home>/<service>.log, in a process group of its
        own: `deployment` stops it as a whole (`kill_group`), whatever happens."""
        with (self.home / f"{service}.log").open("wb") as log:
            self.processes[service] = subprocess.Popen(
                [AIRFLOW, *args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.home,
                start_new_session=True,
            )

    def start_services(self) -> None:
        """The API server, scheduler and DAG processor (SERVICES), then wait for the API server."""
        for service, args in SERVICES.items():
            self.start(service, args)
        self.wait_serving()

    def wait_serving(self) -> None:
        """Until the API server answers its health check (SERVER_START_TIMEOUT; a dead one fails now)."""
        self.wait_for(
            "the API server",
            lambda: self.request("GET", "/api/v2/monitor/health", auth=False),
            timeout=SERVER_START_TIMEOUT,
        )

    def wait_for(self, what: str, check: Any, timeout: float, every: float = 2.0) -> Any:
        """Poll `check()` until it returns something truthy; fail with the services' logs."""
        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                result = check()
                if result:
                    return result
            except (AssertionError, OSError, ValueError) as err:
                last_error = err
            time.sleep(every)
        raise AssertionError(
            f"timed out after {timeout:.0f} s waiting for {what} ({last_error})\n{self.logs()}"
        )


def airflow_env(home: Path, dags: Path, metadata_url: str, history_db: str, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "_AIRFLOW"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # a new or rewritten DAG file is parsed at the next refresh (its mtime is newer than its
            # last parse); an unchanged one is not parsed again every 10 s (Airflow 3.3's
            # prepare_file_queue): the guarded month's DAG processor took 9.2 CPU-s where it took 19.1
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
            "AIRFLOW_CONN_IDEMPOTENT_HISTORY": json.dumps(
                {
                    "conn_type": "postgres",
                    "host": PG_HOST,
                    "port": PG_PORT,
                    "login": PG_USER,
                    "schema": history_db,
                }
            ),
        }
    )
    return env


@pytest.fixture(scope="session")
def e2e_dags(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The DAGs folder the cluster parses; tests write their DAG files here before asking for it."""
    return tmp_path_factory.mktemp("e2e_dags")


@contextlib.contextmanager
def deployment(
    tmp_path_factory: pytest.TempPathFactory, prefix: str, dags: Path, grace: float = 15.0
) -> Iterator[AirflowCluster]:
    """A fresh deployment: metadata and history databases `<prefix>_<hex>` and `<prefix>_<hex>_history`,
    an AIRFLOW_HOME, a free port, `airflow_env`'s settings (change `cluster.env` before starting
    anything). Nothing is started here; after the block every process started by `cluster.start` is
    stopped by its process group (`grace` s to finish) and both databases are dropped."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    history_db = f"{name}_history"
    home = tmp_path_factory.mktemp(f"{prefix}_home")
    port = free_port()
    admin = pg_admin()
    metadata_url = f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    cluster = AirflowCluster(
        home=home,
        dags=dags,
        env=airflow_env(home, dags, metadata_url, history_db, port),
        base_url=f"http://127.0.0.1:{port}",
        history_url=f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{history_db}",
    )
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            conn.execute(sa.text(f'CREATE DATABASE "{history_db}"'))
        yield cluster
    finally:
        for proc in cluster.processes.values():
            kill_group(proc, grace)
        for db in (name, history_db):
            with contextlib.suppress(Exception):
                drop_database(admin, db)
        admin.dispose()


@pytest.fixture(scope="session")
def airflow_cluster(tmp_path_factory: pytest.TempPathFactory, e2e_dags: Path) -> Iterator[AirflowCluster]:
    with deployment(tmp_path_factory, "idem_e2e", e2e_dags) as cluster:
        cluster.migrate()
        cluster.start_services()
        yield cluster


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, a fresh profile; Playwright drives it (never downloads one)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the browser test needs Playwright: pip install -e '.[dev]' (or pip install playwright)",
            pytrace=False,
        )
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set IDEM_TEST_CHROMIUM)",
            pytrace=False,
        )
    profile = tempfile.mkdtemp(prefix="idem_ui_chromium_")
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                args=CHROMIUM_ARGS,
                headless=True,
                viewport={"width": 1440, "height": 1000},
                locale="en-US",
                timezone_id="UTC",
            )
            context.set_default_timeout(30_000)
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def shot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path

"""End to end: docker-compose.yaml's cluster without Docker, with the Celery executor.

The same topology as the compose file, as local processes: `airflow api-server`, `scheduler`,
`dag-processor` and `celery worker`, started with the settings of deploy/cluster.env (the file
the compose file hands every component) moved to local addresses by `deploy.settings.relocate`:
the executor is CeleryExecutor, the broker a free database of the local Redis, the result backend
and the metadata a fresh PostgreSQL database, and the connections `warehouse` and
`idempotent_history` fresh PostgreSQL databases created and seeded by the compose PostgreSQL's own
init script (deploy/postgres-init/). The DAGs folder is the repository's dags/, the one the
compose file mounts. Only the triggerer is left out: no payouts task defers.

Through the REST API: a manual run of payouts_overwrite for 2026-08-25 (policy v1), then a
guarded corrective backfill of 2026-08-24..25 under policy v2, which reruns the 25th. Then:

- the warehouse holds each day's payouts as the scenario's formula gives them (computed here in
  Python from docs/contributing.md, The payouts scenario, not by the package);
- the history store holds the window writes: the 25th written twice (ordinal 1 under v1, then
  ordinal 2, a new dataset version, with the corrective diff), the 24th once;
- every task attempt was recorded by the listener inside the Celery worker: source "worker",
  and a hostname that only the worker's processes produce (a hostname callable set for the worker
  alone, which records the task process's chain of parent pids: the `airflow celery worker`
  process is in it); Celery's result backend holds one successful task per attempt.

Every process is killed (its process group) and every database dropped at the end.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import secrets
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.history.spool import SPOOL_DIR, Spool
from deploy.settings import CLUSTER_ENV, DEPLOY_DIR, read_env, relocate
from tests.conftest import DAGS_FOLDER, PG_HOST, PG_PORT, PG_USER
from tests.e2e.conftest import (
    AIRFLOW,
    SERVER_START_TIMEOUT,
    SERVICES,
    AirflowCluster,
    airflow_env,
    drop_database,
    free_port,
    kill_group,
    pg_admin,
)

pytestmark = pytest.mark.e2e

REDIS_HOST = os.environ.get("IDEM_TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("IDEM_TEST_REDIS_PORT", "6379"))
REDIS_HOW_TO_START = (
    f"Redis at {REDIS_HOST}:{REDIS_PORT} is not reachable. Start it with `redis-server --daemonize yes "
    '--bind 127.0.0.1 --port 6379 --save "" --appendonly no` (or run `bash .ci/run`).'
)
#: Set (NX) in the Redis database this test takes, so two test sessions never share one.
REDIS_CLAIM_KEY = "idem_e2e:claimed_by"

INIT_SCRIPT = DEPLOY_DIR / "postgres-init" / "10-idempotent-databases.sh"
WORKER = "celery-worker"
WORKER_ARGS = ["celery", "worker", "--concurrency", "2"]

DAG_ID = "payouts_overwrite"
TARGET = "warehouse:payouts"
MANUAL_DAY = date(2026, 8, 25)
BACKFILL_DAYS = (date(2026, 8, 24), date(2026, 8, 25))
CORRECTIVE = {"semantics": "corrective", "reason": "e2e: contract fix, v2 rates", "policy_version": "v2"}

# Imported only by the Celery worker's processes (PYTHONPATH and [core] hostname_callable are set
# for it alone): the task process reports a hostname no other process can produce.
HOSTNAME_MODULE = '''\
"""[core] hostname_callable for the e2e Celery worker: its mark, then this process's parent chain."""

import os


def hostname() -> str:
    chain, pid = [], os.getpid()
    while pid > 1 and len(chain) < 12:
        chain.append(str(pid))
        with open(f"/proc/{pid}/stat") as stat:
            pid = int(stat.read().rsplit(")", 1)[1].split()[1])  # field 4: the parent pid
    return os.environ["IDEM_E2E_WORKER_MARK"] + ":" + "<".join(chain)
'''

CENT = Decimal("0.01")


# --------------------------------------------------------------------------------------------
# The scenario's figures, from its formula (docs/contributing.md, The payouts scenario), not from the package.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DayFigures:
    rows: int
    total: Decimal
    high_priced: int  # sales at or above 400.00: the rows v2 pays differently


def scenario_payouts(day: date, policy: str) -> DayFigures:
    """sale_id i in 1..60000, 2,000 a day from 2026-08-01, price round(25 + ((i*37) % 900) * 0.5, 2)."""
    first = (day - date(2026, 8, 1)).days * 2000 + 1
    total, high = Decimal(0), 0
    for i in range(first, first + 2000):
        price = (Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")).quantize(CENT, ROUND_HALF_UP)
        rate = Decimal("0.55") if policy == "v2" and price >= 400 else Decimal("0.60")
        total += (price * rate).quantize(CENT, ROUND_HALF_UP)
        high += price >= 400
    return DayFigures(2000, total, high)


def warehouse_figures(engine: sa.Engine) -> dict[date, tuple[int, Decimal, int]]:
    """Rows, total and rows at the v2 rate per day of `payouts`, read with a plain SELECT."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT sale_date, COUNT(*), SUM(amount_eur), SUM(CASE WHEN rate = 0.55 THEN 1 ELSE 0 END) "
                "FROM payouts GROUP BY sale_date ORDER BY sale_date"
            )
        ).all()
    return {r[0]: (int(r[1]), Decimal(r[2]).quantize(CENT), int(r[3])) for r in rows}


# --------------------------------------------------------------------------------------------
# The cluster.
# --------------------------------------------------------------------------------------------


@dataclass
class CeleryCluster(AirflowCluster):
    settings: dict[str, str] | None = None  # deploy/cluster.env, relocated
    worker_mark: str = ""
    warehouse_url: str = ""
    redis_db: int = -1

    def logs(self) -> str:
        return "\n".join(f"===== {name} =====\n{self.log(name)}" for name in self.processes)

    def start(self, name: str, args: list[str], env: dict[str, str]) -> None:
        with (self.home / f"{name}.log").open("wb") as log:
            self.processes[name] = subprocess.Popen(
                [AIRFLOW, *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.home,
                start_new_session=True,  # own process group: killed as a whole
            )


@contextlib.contextmanager
def redis_database() -> Iterator[int]:
    """A Redis database no one else uses (claimed with SET NX, empty but for the claim), flushed after."""
    import redis  # installed with apache-airflow-providers-celery (celery[redis])

    try:
        probe = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, socket_timeout=5)
        config: dict[str, Any] = probe.config_get("databases")  # type: ignore[assignment]
        count = int(config.get("databases") or 16)
        probe.close()
    except redis.RedisError as err:
        pytest.fail(f"{REDIS_HOW_TO_START}\nClient said: {err}", pytrace=False)
    token = secrets.token_hex(8)
    for db in random.sample(range(1, count), count - 1):  # 0 is everyone's default: leave it
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db, socket_timeout=5)
        if not client.set(REDIS_CLAIM_KEY, token, nx=True, ex=3600):
            client.close()
            continue
        if client.dbsize() != 1:  # someone uses it without claiming: give it back
            client.delete(REDIS_CLAIM_KEY)
            client.close()
            continue
        try:
            yield db
        finally:
            if client.get(REDIS_CLAIM_KEY) == token.encode():
                client.flushdb()
            client.close()
        return
    pytest.fail(f"no free database among Redis's {count} at {REDIS_HOST}:{REDIS_PORT}", pytrace=False)


def _worker_env(env: dict[str, str], home: Path, mark: str) -> dict[str, str]:
    site = home / "worker_site"
    site.mkdir()
    (site / "idem_e2e_worker_host.py").write_text(HOSTNAME_MODULE)
    path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    return {
        **env,
        "PYTHONPATH": path,
        "AIRFLOW__CORE__HOSTNAME_CALLABLE": "idem_e2e_worker_host.hostname",
        "IDEM_E2E_WORKER_MARK": mark,
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CeleryCluster]:
    for module in ("airflow.providers.celery", "redis"):
        if importlib.util.find_spec(module) is None:
            pytest.fail(
                f"{module} is not installed: `pip install -e '.[dev]'` (the dev extra brings "
                "apache-airflow-providers-celery, which brings celery[redis])",
                pytrace=False,
            )
    name = f"idem_e2e_celery_{secrets.token_hex(5)}"
    databases = {"airflow": name, "idempotent_history": f"{name}_history", "warehouse": f"{name}_warehouse"}
    home = tmp_path_factory.mktemp("celery_home")
    port = free_port()
    admin = pg_admin()
    created: list[str] = []
    with contextlib.ExitStack() as stack:
        redis_db = stack.enter_context(redis_database())
        settings = relocate(
            read_env(CLUSTER_ENV),
            addresses={
                "postgres:5432": f"{PG_HOST}:{PG_PORT}",
                "redis:6379": f"{REDIS_HOST}:{REDIS_PORT}",
                "airflow-apiserver:8080": f"127.0.0.1:{port}",
            },
            databases=databases,
            postgres_userinfo=PG_USER,
            redis_db=redis_db,
        )
        # The e2e harness's environment (AIRFLOW_HOME, simple auth manager with every user an
        # admin, API port and secrets), then the cluster's settings over it, then the ports that
        # must not collide with other clusters on this machine (compose gives each container its own).
        env = airflow_env(
            home,
            DAGS_FOLDER,
            settings["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"],
            databases["idempotent_history"],
            port,
        )
        env.update(settings)
        env.update(
            {
                "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            }
        )
        cluster = CeleryCluster(
            home=home,
            dags=DAGS_FOLDER,
            env=env,
            base_url=f"http://127.0.0.1:{port}",
            history_url=f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{databases['idempotent_history']}",
            settings=settings,
            worker_mark=f"idem-e2e-celery-worker-{secrets.token_hex(4)}",
            warehouse_url=f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{databases['warehouse']}",
            redis_db=redis_db,
        )
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            created.append(name)
            # The history and warehouse databases: the compose PostgreSQL's init script, run here.
            created += [databases["idempotent_history"], databases["warehouse"]]
            init = subprocess.run(
                ["bash", str(INIT_SCRIPT)],
                env={
                    **os.environ,
                    "PGHOST": PG_HOST,
                    "PGPORT": str(PG_PORT),
                    "POSTGRES_USER": PG_USER,
                    "AIRFLOW_CONN_IDEMPOTENT_HISTORY": settings["AIRFLOW_CONN_IDEMPOTENT_HISTORY"],
                    "AIRFLOW_CONN_WAREHOUSE": settings["AIRFLOW_CONN_WAREHOUSE"],
                },
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert init.returncode == 0, f"{INIT_SCRIPT.name} failed:\n{init.stdout}\n{init.stderr}"
            assert f"{databases['warehouse']}: 60000 sales" in init.stdout, init.stdout
            # The DAG's ensure_table would create it; created up front because two runs starting
            # at once would race on CREATE TABLE IF NOT EXISTS, which PostgreSQL does not serialise.
            warehouse = sa.create_engine(cluster.warehouse_url)
            create_payouts(warehouse)
            warehouse.dispose()

            migrate = subprocess.run(
                [AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
            )
            assert migrate.returncode == 0, f"airflow db migrate failed:\n{migrate.stderr[-3000:]}"
            for service, args in SERVICES.items():
                cluster.start(service, args, env)
            cluster.start(WORKER, WORKER_ARGS, _worker_env(env, home, cluster.worker_mark))
            cluster.wait_serving()
            cluster.wait_for(
                "the Celery worker", lambda: " ready." in cluster.log(WORKER, 100_000), SERVER_START_TIMEOUT
            )
            yield cluster
        finally:
            for proc in cluster.processes.values():
                kill_group(proc)
            for db in created:
                with contextlib.suppress(Exception):
                    drop_database(admin, db)
            admin.dispose()


# --------------------------------------------------------------------------------------------
# The tests.
# --------------------------------------------------------------------------------------------


def test_the_processes_run_the_compose_settings(cluster: CeleryCluster) -> None:
    """Every setting of deploy/cluster.env reaches every process; only addresses differ."""
    assert cluster.settings is not None
    compose = read_env(CLUSTER_ENV)
    assert set(cluster.settings) == set(compose)
    for key, value in cluster.settings.items():
        assert cluster.env[key] == value, key
        if "://" not in compose[key]:
            assert value == compose[key], key  # not an address: taken as it is
    assert cluster.env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert (
        cluster.env["AIRFLOW__CELERY__BROKER_URL"] == f"redis://{REDIS_HOST}:{REDIS_PORT}/{cluster.redis_db}"
    )
    assert cluster.env["AIRFLOW__CELERY__RESULT_BACKEND"].startswith("db+postgresql://")
    assert set(cluster.processes) == {"api-server", "scheduler", "dag-processor", WORKER}
    health = cluster.request("GET", "/api/v2/monitor/health", auth=False)
    assert health["metadatabase"]["status"] == "healthy", health
    # The compose file's scheduler health check (AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK), here.
    scheduler = (
        f"http://127.0.0.1:{cluster.env['AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT']}/health"
    )
    cluster.wait_for(
        "the scheduler's health check", lambda: urllib.request.urlopen(scheduler, timeout=5).status == 200, 60
    )


def runs_of(cluster: CeleryCluster, query: str = "") -> list[dict[str, Any]]:
    return list(cluster.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns?limit=50{query}")["dag_runs"])


def all_finished(cluster: CeleryCluster, expected: int, query: str = "") -> list[dict[str, Any]] | None:
    runs = runs_of(cluster, query)
    if len(runs) >= expected and all(r["state"] in ("success", "failed") for r in runs):
        return runs
    return None


def test_payouts_and_a_guarded_backfill_run_on_the_celery_worker(cluster: CeleryCluster) -> None:
    cluster.wait_for(
        "payouts_overwrite to be parsed", lambda: cluster.request("GET", f"/api/v2/dags/{DAG_ID}"), 120
    )

    # 1. A manual run for the 25th under the default policy v1. Unpausing also lets the scheduler
    #    create the DAG's latest scheduled run (the repository's DAG: catchup off, no end date).
    manual = cluster.request(
        "POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": f"{MANUAL_DAY.isoformat()}T00:00:00Z"}
    )
    cluster.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    runs = cluster.wait_for("the manual run", lambda: all_finished(cluster, 1), timeout=150)
    assert {r["state"] for r in runs} == {"success"}, runs
    v1 = scenario_payouts(MANUAL_DAY, "v1")
    assert (v1.rows, v1.total) == (2000, Decimal("299730.00"))  # the scenario's known truth
    warehouse = sa.create_engine(cluster.warehouse_url)
    try:
        assert warehouse_figures(warehouse) == {MANUAL_DAY: (2000, v1.total, 0)}

        # 2. A guarded corrective backfill of the 24th and 25th under v2; the 25th's run is redone.
        status, backfill = cluster.call(
            "POST",
            "/api/v2/backfills",
            {
                "dag_id": DAG_ID,
                "from_date": f"{BACKFILL_DAYS[0].isoformat()}T00:00:00Z",
                "to_date": f"{BACKFILL_DAYS[-1].isoformat()}T00:00:00Z",
                "reprocess_behavior": "completed",
                "max_active_runs": 2,
                "dag_run_conf": CORRECTIVE,
            },
        )
        assert status == 200, backfill
        backfill_runs = cluster.wait_for(
            "the backfill's two runs",
            lambda: all_finished(cluster, 2, "&run_type=backfill"),
            timeout=180,
        )
        assert [(r["state"], r["conf"]) for r in backfill_runs] == [("success", CORRECTIVE)] * 2, (
            backfill_runs
        )
        assert manual["dag_run_id"] in {r["dag_run_id"] for r in backfill_runs}
        cluster.wait_for(
            "the backfill to complete",
            lambda: cluster.request("GET", f"/api/v2/backfills/{backfill['id']}")["completed_at"],
            timeout=60,
        )
        # Both days hold the v2 payouts, row for row as the formula gives them; no other day is written.
        expected = {day: scenario_payouts(day, "v2") for day in BACKFILL_DAYS}
        assert warehouse_figures(warehouse) == {
            day: (f.rows, f.total, f.high_priced) for day, f in expected.items()
        }
    finally:
        warehouse.dispose()

    all_runs = cluster.wait_for("every run to finish", lambda: all_finished(cluster, 2), timeout=120)
    assert {r["state"] for r in all_runs} == {"success"}, all_runs
    engine = sa.create_engine(cluster.history_url)
    try:
        store = HistoryStore(engine)
        # A record the store did not take within its bounded wait (a loaded machine) waits in the
        # worker's spool for the next write, which the last run never gets: deliver it, as that write
        # would, so every attempt is counted whichever way it reached the store.
        run_ids = {r["dag_run_id"] for r in all_runs}
        spool = Spool(Path(cluster.env["AIRFLOW_HOME"]) / SPOOL_DIR)
        spooled: list[int] = []

        def all_recorded() -> bool:
            spooled.append(spool.deliver(store))
            ran = executions(store, run_ids)
            # the failure names what is there (wait_for reports the last AssertionError)
            assert len(ran) >= expected_attempts(run_ids), f"{len(ran)} recorded: {sorted(ran)}"
            return True

        cluster.wait_for("every attempt's record", all_recorded, timeout=60, every=1.0)
        print(f"\n[history] records delivered from the worker's spool: {sum(spooled)}")
        check_window_writes(store, manual["dag_run_id"], expected)
        check_worker_attempts(cluster, store, run_ids)
    finally:
        engine.dispose()


def check_window_writes(store: HistoryStore, manual_run_id: str, expected: dict[date, DayFigures]) -> None:
    """The 25th: written by the manual run (v1), then by the backfill (v2, corrective); the 24th once."""

    def writes(day: date) -> list[dict[str, Any]]:
        start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
        return [w for w in store.writes(dag_id=DAG_ID, target=TARGET) if w["window_start"] == start]

    v1 = scenario_payouts(MANUAL_DAY, "v1")
    first, second = writes(MANUAL_DAY)
    assert (first["ordinal"], first["dataset_version"], first["status"]) == (1, 1, "written")
    assert (first["run_id"], first["run_type"], first["try_number"]) == (manual_run_id, "manual", 1)
    assert (first["policy_version"], first["row_count"], first["rows_inserted"]) == ("v1", 2000, 2000)
    assert (second["ordinal"], second["dataset_version"], second["status"]) == (2, 2, "written")
    assert (second["run_id"], second["run_type"], second["try_number"]) == (manual_run_id, "backfill", 2)
    assert (second["semantics"], second["policy_version"], second["row_count"]) == ("corrective", "v2", 2000)
    assert second["checksum"] != first["checksum"] and second["fingerprint"] != first["fingerprint"]
    diff = json.loads(second["diff"])
    v2 = expected[MANUAL_DAY]
    assert (diff["rows_before"], diff["rows_after"], diff["added"], diff["removed"]) == (2000, 2000, 0, 0)
    assert (diff["changed"], diff["unchanged"]) == (v2.high_priced, 2000 - v2.high_priced)
    amounts = diff["measures"]["amount_eur"]
    assert (Decimal(str(amounts["before"])), Decimal(str(amounts["after"]))) == (v1.total, v2.total)

    (only,) = writes(BACKFILL_DAYS[0])
    assert (only["ordinal"], only["dataset_version"], only["status"]) == (1, 1, "written")
    assert (only["run_type"], only["semantics"], only["policy_version"]) == ("backfill", "corrective", "v2")
    diff = json.loads(only["diff"])
    assert (diff["rows_before"], diff["rows_after"], diff["added"]) == (0, 2000, 2000)


def expected_attempts(run_ids: set[str]) -> int:
    """Each run's two tasks; the 25th's run twice (manual, then redone by the backfill)."""
    return 2 * (len(run_ids) + 1)


def executions(store: HistoryStore, run_ids: set[str]) -> set[tuple[str, str, int]]:
    """(run, task, try) of every attempt of these runs the store holds as having started."""
    return {
        (a["run_id"], a["task_id"], a["try_number"])
        for a in store.attempts(dag_id=DAG_ID)
        if a["run_id"] in run_ids and a["event"] == "running"
    }


def check_worker_attempts(cluster: CeleryCluster, store: HistoryStore, run_ids: set[str]) -> None:
    """Every attempt was recorded inside the Celery worker's process tree, and ran as a Celery task."""
    worker_pid = cluster.processes[WORKER].pid
    others = {proc.pid for name, proc in cluster.processes.items() if name != WORKER}
    attempts = [a for a in store.attempts(dag_id=DAG_ID) if a["run_id"] in run_ids]
    events = {(a["run_id"], a["task_id"], a["try_number"], a["event"]) for a in attempts}
    ran = executions(store, run_ids)
    assert len(ran) == expected_attempts(run_ids), sorted(ran)
    assert {e[:3] for e in events if e[3] == "success"} == ran, sorted(events)
    for a in attempts:
        assert a["source"] == "worker", a
        mark, _, chain = (a["hostname"] or "").partition(":")
        assert mark == cluster.worker_mark, a
        pids = [int(p) for p in chain.split("<")]
        assert worker_pid in pids[1:], (worker_pid, a["hostname"])  # a descendant of `airflow celery worker`
        assert not others & set(pids), (others, a["hostname"])

    # Celery's result backend (the metadata database, as in the compose file): one successful
    # Celery task per attempt.
    engine = sa.create_engine(
        cluster.env["AIRFLOW__CELERY__RESULT_BACKEND"]
        .removeprefix("db+")
        .replace("postgresql://", "postgresql+psycopg2://")
    )
    try:

        def celery_successes() -> int | None:
            with engine.connect() as conn:
                n = conn.execute(
                    sa.text("SELECT COUNT(*) FROM celery_taskmeta WHERE status = 'SUCCESS'")
                ).scalar_one()
            return int(n) if n >= len(ran) else None

        assert cluster.wait_for("Celery's results", celery_successes, timeout=30) == len(ran)
    finally:
        engine.dispose()

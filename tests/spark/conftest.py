"""The session's Spark cluster: a master, two workers and a Spark Connect server on free ports.

Started once, lazily (only when a selected test asks for it), stopped by process group at the
end of the session. Its Connect server loads Delta Lake (the jars `make spark-jars` copies into
.cache/spark-jars, or IDEM_SPARK_JARS), so parquet and Delta tables live in one catalog, and, with
Iceberg's runtime among the jars, an Iceberg catalog `ice` (JDBC, in the session's fresh PostgreSQL
database `pg_url`, dropped at the end; its files under the cluster's base directory). Tests
marked `spark` use it through the fixtures below. Set IDEM_SPARK_CLUSTER_DIR to the base
directory of a cluster already running (development) to use it instead; the tests that kill the
Connect server then skip.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.history import HistoryStore
from airflow_idempotent.spark.cluster import (
    DELTA_CONF,
    JVM_ROLES,
    SPARK_JARS_DIR,
    SparkCluster,
    catalog_plugin,
    delta_jars,
    has_iceberg,
    iceberg_conf,
)
from tests.reliability.conftest import SEED_ENV, Recorder, recording

log = logging.getLogger(__name__)

#: The Airflow connection the Spark tests' operators use.
SPARK_CONN_ID = "spark_warehouse"
#: The test cluster evaluates expressions without generated code. Its windows hold 2,000 rows a day,
#: and the Connect server (`server` mode) isolates each session's artifacts, so every operator call
#: compiled its plans' generated Java again, costing more than it saved: on the Delta, Iceberg and
#: table-guard files (47 tests, load 3.5-4.5) the cluster used 661 s of CPU without codegen against
#: 840 s with it, 555 s of wall time against 677. Interpreted evaluation is the path Spark itself
#: falls back to whenever codegen fails, with the same results; `factoryMode` is the internal conf
#: Spark's own tests use for it. The benches, at 100,000 rows and more, keep codegen on, and
#: IDEM_SPARK_CODEGEN=1 (set by `make reliability`'s Spark run) puts it back here.
SMALL_DATA_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: The test cluster's JVM options by role (`JVM_ROLES`; IDEM_SPARK_JAVA_OPTIONS_<ROLE> replaces a role's,
#: empty for the JVM's defaults). The executors and daemons compile with C1 only: on small data their
#: C2 compilations cost more than the code they sped up. On the Delta, overwrite and guard files (29
#: tests; other sessions on the machine, load 4-5.5) C1 everywhere took the workers and their
#: executors from 279 to 174 CPU-s and the master from 10 to 6, but the Connect server from 441 to 534
#: (its analyzer and optimizer run hot; wall 809 s against 769): the server keeps C2. So (executors
#: and daemons C1 only) the cluster used 495 CPU-s against 731 and 679 (two runs with the defaults),
#: 438 s of wall time against 769 and 567. Like
#: SMALL_DATA_CONF, off under IDEM_SPARK_CODEGEN=1 (`make reliability`), and the benches' clusters
#: keep the JVM's defaults.
JAVA_OPTIONS: dict[str, list[str]] = {
    "executor": ["-XX:TieredStopAtLevel=1"],
    "daemon": ["-XX:TieredStopAtLevel=1"],
}
#: Seconds a Spark test may take (the longest took 70 s in a clean-clone run). The thread method:
#: a Spark Connect client stuck in a lock never runs a signal handler (SIGALRM, SIGINT), so the
#: timeout prints every thread's stack and ends the process, well before the group's limit.
TEST_TIMEOUT = 400


@pytest.hookimpl(trylast=True)  # after tests/conftest.py's order by file
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each Spark test gets TEST_TIMEOUT; the tests that restart the Connect server run last, since
    the server that comes back has lost its warm JIT and caches: the Delta test after the restart
    took 95-108 s where it takes 51-66 s on a warm server."""
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.path).startswith(here + os.sep) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT, method="thread"))
    items.sort(key=lambda item: item.get_closest_marker("restarts_connect") is not None)


@pytest.fixture(scope="session")
def spark_cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[SparkCluster]:
    attach = os.environ.get("IDEM_SPARK_CLUSTER_DIR")  # a running cluster's base dir (development)
    if attach:
        yield SparkCluster.attach(attach)
        return
    began = time.monotonic()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    jars = delta_jars(os.environ.get("IDEM_SPARK_JARS") or os.path.join(root, SPARK_JARS_DIR))
    base = tmp_path_factory.mktemp("spark")
    conf = {**DELTA_CONF, **catalog_plugin(jars)}
    if os.environ.get("IDEM_SPARK_CODEGEN") != "1":  # `make reliability` runs with Spark's codegen on
        conf.update(SMALL_DATA_CONF)
    if has_iceberg(jars):  # the catalog in the session's PostgreSQL database (dropped after the cluster)
        url = sa.engine.make_url(request.getfixturevalue("pg_url"))
        jdbc_url = f"jdbc:postgresql://{url.host}:{url.port}/{url.database}"
        conf.update(iceberg_conf(jdbc_url, url.username or "postgres", Path(base) / "iceberg"))
    # `server`: Spark's own launcher, the isolating server most deployments run; `plugin`: sessions
    # sharing compiled code (the bench's default, docs/engines.md): the operators must pass on both
    mode = os.environ.get("IDEM_SPARK_CONNECT_MODE") or "server"
    small = os.environ.get("IDEM_SPARK_CODEGEN") != "1"  # `make reliability`: codegen and C2 as deployed
    java_options = {
        role: os.environ.get(
            f"IDEM_SPARK_JAVA_OPTIONS_{role.upper()}", " ".join(JAVA_OPTIONS.get(role, []) if small else [])
        ).split()
        for role in JVM_ROLES
    }
    cluster = SparkCluster.start(
        base, extra_conf=conf, jars=jars, connect_mode=mode, java_options=java_options
    )
    say = figures_line(request.config)
    say(f"spark cluster JVM options: {java_options}")
    say(f"spark cluster started in {time.monotonic() - began:.1f} s {cluster.start_seconds}")
    try:
        yield cluster
    finally:
        say(f"spark cluster RSS at the end (MiB): {cluster.rss_mib()}")
        cpu = cluster.cpu_seconds()
        own = resource.getrusage(resource.RUSAGE_SELF)
        say(
            f"spark cluster CPU seconds at the end: {cpu}, {sum(cpu.values()):.1f} in all;"
            f" pytest's own {own.ru_utime + own.ru_stime:.1f}"
        )
        count, seconds = cluster.gc_pauses()
        say(f"spark connect server GC pauses since its last start: {count}, {seconds} s in all")
        stop_began = time.monotonic()
        cluster.stop()
        say(f"spark cluster stopped in {time.monotonic() - stop_began:.1f} s")


def figures_line(config: pytest.Config) -> Callable[[str], None]:
    """Writes a line of the cluster's figures to the terminal, where a passing run shows it too (a
    logged warning in a session fixture's teardown is shown only on failure)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def say(line: str) -> None:
        if reporter is None or capture is None:
            log.warning("%s", line)
            return
        with capture.global_and_fixture_disabled():  # the test's output capture holds fd 1
            reporter.write_line(f"[spark] {line}")

    return say


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    """A fresh SQLite history store for one test, the operators' history connection pointed at it."""
    path = tmp_path / "history.db"
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    return HistoryStore(sa.create_engine(f"sqlite:///{path}"))


@pytest.fixture(scope="session")
def spark_conn(spark_cluster: SparkCluster) -> Iterator[str]:
    """The `spark_connect` Airflow connection of the session cluster (an env var), by conn_id."""
    var = f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}"
    old = os.environ.get(var)
    os.environ[var] = json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": spark_cluster.connect_port}
    )
    try:
        yield SPARK_CONN_ID
    finally:
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old


@pytest.fixture(scope="session")
def _spark_clients(spark_cluster: SparkCluster) -> Iterator[dict[int, Any]]:
    clients: dict[int, Any] = {}
    try:
        yield clients
    finally:
        for session in clients.values():
            session.stop()


@pytest.fixture
def spark(spark_cluster: SparkCluster, _spark_clients: dict[int, Any]) -> Any:
    """A Spark Connect client for the tests' own setup and checks (not the code under test): one
    per Connect server, so a test that restarted the server leaves the next a working client."""
    if spark_cluster.restarts not in _spark_clients:
        _spark_clients[spark_cluster.restarts] = spark_cluster.session()
    return _spark_clients[spark_cluster.restarts]


@pytest.fixture(scope="session")
def reliability(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    """The reliability suite's recorder (tests/reliability/conftest.py) for the Spark cases, so
    tools/reliability_report.py puts the Spark crash matrix in RELIABILITY.md with the others."""
    with recording(request, int(os.environ.get(SEED_ENV) or 0), ["tests/spark"]) as recorder:
        yield recorder

"""A real Spark standalone cluster on loopback, from the pip-installed pyspark: for tests and benches.

    with SparkCluster.start(base_dir) as cluster:
        spark = cluster.session()          # a Spark Connect client
        print(cluster.connect_url)         # sc://127.0.0.1:<port>

One master, `workers` workers (1 core, 1g each) and a Spark Connect server (Hive catalog with its
own warehouse directory and embedded Derby metastore) attached to the master, every port a free
loopback port. Given Delta Lake's jars (`delta_jars`: `make spark-jars` copies them from Maven), the
server also loads Delta's session extension and catalog (`DELTA_CONF`), so one cluster serves
tables created `USING parquet` and `USING delta`. The server runs as Spark's launcher starts it
(`connect_mode="server"`) or as a plugin of a driver of ours whose sessions share compiled code
(`"plugin"`, `CONNECT_MODES`). Each process runs in a process group of its own
(a worker's executor JVMs are in its group), is ready when its log says so, and is stopped by its
group: SIGTERM, then SIGKILL.

Needs `pip install 'airflow-idempotent[spark]'` and a Java 17+ runtime (`java` on PATH or JAVA_HOME).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from airflow_idempotent.spark.adapter import open_session
from airflow_idempotent.testing.ports import free_port

__all__ = [
    "CONNECT_MODES",
    "DELTA_CONF",
    "ICEBERG_CATALOG",
    "JVM_ROLES",
    "ClusterError",
    "SparkCluster",
    "delta_jars",
    "has_iceberg",
    "iceberg_conf",
    "spark_home",
]

#: How long a process may take to print its ready line.
READY_TIMEOUT = 120.0
MASTER_READY = "I have been elected leader"
WORKER_READY = "Successfully registered with master"
CONNECT_READY = "Spark Connect server started"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: How the Connect server starts: `server`, Spark's own launcher (`CONNECT_CLASS`, as
#: `start-connect-server.sh`: artifact isolation forced on, so each session compiles its generated
#: code again), or `plugin`, a driver of ours with Connect as its plugin and artifact isolation off
#: (sessions share one class loader and its compiled code; `connect_plugin_driver.py`).
CONNECT_MODES = ("server", "plugin")
#: The `plugin` mode's conf: Connect started by the driver's plugin, sessions not isolated.
PLUGIN_CONF = {
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.sql.artifact.isolation.enabled": "false",
    "spark.sql.artifact.isolation.alwaysApplyClassloader": "false",
}
#: The Connect server's conf for Delta Lake: its SQL (REPLACE WHERE, MERGE INTO, time travel) and
#: its catalog in place of the session catalog, which still serves the parquet tables.
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Spark 4.1 binds parameters in its parser, and Delta's parser (which wraps it) drops them: every
    # `spark.sql(q, args)` fails UNBOUND_SQL_PARAMETER (delta-io/delta#7640) unless parameters are
    # bound by the analyzer as before 4.1
    "spark.sql.legacy.parameterSubstitution.constantsOnly": "true",
    # a table's state is rebuilt from its log in this many tasks (Delta's default, 50, is for big
    # clusters: on two 1-core executors each snapshot and time travel cost a 50-task stage)
    "spark.databricks.delta.snapshotPartitions": "2",
}
#: The name of the Iceberg catalog the Connect server gets with Iceberg's jars (`iceberg_conf`): its
#: tables are named `ice.<database>.<table>`, next to the session catalog's Delta and parquet tables.
ICEBERG_CATALOG = "ice"
#: Iceberg's SQL (MERGE INTO, DELETE, time travel by snapshot id, CALL) on Spark.
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
#: The cluster's JVMs by role, for `SparkCluster.start`'s `java_options`: the Connect server (the
#: driver of every session), the executors, the master and workers (`SPARK_DAEMON_JAVA_OPTS`).
JVM_ROLES = ("driver", "executor", "daemon")
#: Where `make spark-jars` puts the pinned jars (tools/spark-jars/pom.xml), from the repository root.
SPARK_JARS_DIR = ".cache/spark-jars"
#: The `plugin` mode's driver script, submitted as the application.
PLUGIN_DRIVER = Path(__file__).with_name("connect_plugin_driver.py")


class ClusterError(RuntimeError):
    """A cluster process failed to start (its log's tail is in the message)."""


def spark_home() -> Path:
    """The Spark distribution inside the pyspark package (bin/spark-class, jars/)."""
    try:
        import pyspark
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ClusterError("pyspark is not installed: pip install 'airflow-idempotent[spark]'") from err
    return Path(pyspark.__file__).parent


def delta_jars(directory: str | Path) -> list[Path]:
    """Delta Lake's jars in `directory` (filled by `make spark-jars`); refuses a folder without them."""
    jars = sorted(Path(directory).glob("*.jar"))
    if not any(j.name.startswith("delta-spark_") for j in jars):
        raise ClusterError(
            f"no Delta Lake jars in {directory}: run `make spark-jars` (Maven copies the versions pinned "
            "in tools/spark-jars/pom.xml there)"
        )
    return jars


#: The provider's Spark Connect command (`spark/command`, built by `make spark-jars`): a switch's
#: partition locations set in one catalog call (`CatalogStatements.set_locations`).
CATALOG_PLUGIN_JAR = "airflow-idempotent-connect.jar"
CATALOG_PLUGIN_CONF = {"spark.connect.extensions.command.classes": "airflowidempotent.SetPartitionLocations"}


def catalog_plugin(jars: Sequence[str | Path]) -> dict[str, str]:
    """The Connect server's conf that loads the provider's command when `jars` hold its jar, else
    none (the switch then sets one partition's location per statement)."""
    return dict(CATALOG_PLUGIN_CONF) if any(Path(j).name == CATALOG_PLUGIN_JAR for j in jars) else {}


def has_iceberg(jars: Sequence[str | Path]) -> bool:
    """Whether `jars` hold Iceberg's Spark runtime and PostgreSQL's JDBC driver (its catalog's store)."""
    names = [Path(j).name for j in jars]
    return any(n.startswith("iceberg-spark-runtime-") for n in names) and any(
        n.startswith("postgresql-") for n in names
    )


def iceberg_conf(jdbc_url: str, user: str, warehouse: str | Path, password: str = "") -> dict[str, str]:
    """The Connect server's conf for an Iceberg catalog named `ICEBERG_CATALOG` next to Delta's:
    a JDBC catalog whose tables' pointers live in the PostgreSQL database `jdbc_url` (no metastore),
    their files under `warehouse` (a local directory). Merge it after DELTA_CONF: both formats' SQL
    extensions are listed, Delta's first, since Delta's catalog serves the session catalog."""
    prefix = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    conf = {
        "spark.sql.extensions": f"{DELTA_CONF['spark.sql.extensions']},{ICEBERG_EXTENSIONS}",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": jdbc_url,
        f"{prefix}.jdbc.user": user,
        # the catalog's tables in PostgreSQL with views' columns: without them, looking up a name
        # the catalog lacks (`catalog.tableExists`) fails ("initialized without view support")
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": Path(warehouse).resolve().as_uri(),
    }
    if password:
        conf[f"{prefix}.jdbc.password"] = password
    return conf


def java_home() -> str | None:
    """JAVA_HOME, or the runtime `java` on PATH resolves to."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    if java is None:
        raise ClusterError(
            "no Java runtime: install one (Debian: apt-get install -y openjdk-17-jre-headless) "
            "or set JAVA_HOME"
        )
    return str(Path(os.path.realpath(java)).parent.parent)


def _rss_kib(pid: int) -> int:
    """Resident set size of one process, from /proc (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) of one process and of its children it has waited for, from
    /proc (0 when it is gone): a worker's ended executors are in its children's share."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _group_pids(pgid: int) -> list[int]:
    """Every live process of process group `pgid` (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            pids.append(int(entry.name))
    return pids


@dataclass
class Daemon:
    """One started process (its own process group) and its log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def wait_ready(self, line: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if line in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-25:])
        state = (
            f"exited {self.proc.returncode}"
            if self.proc.poll() is not None
            else f"not ready in {timeout:g} s"
        )
        raise ClusterError(f"{self.name} {state} (waiting for {line!r}); log {self.log}:\n{tail}")

    def rss_kib(self) -> int:
        return sum(_rss_kib(pid) for pid in _group_pids(self.proc.pid))

    def cpu_seconds(self) -> float:
        return sum(_cpu_seconds(pid) for pid in _group_pids(self.proc.pid))

    def signal(self, sig: int) -> None:
        """Signal the whole group (started with start_new_session: led by the process)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the whole group, SIGKILL what is left after `grace` seconds."""
        stop_all([self], grace)


def stop_all(daemons: list[Daemon], grace: float = 10.0) -> None:
    """SIGTERM every daemon's group at once, SIGKILL the groups still alive after `grace` seconds."""
    for daemon in daemons:
        daemon.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_group_pids(d.proc.pid) for d in daemons):
        time.sleep(0.1)
    for daemon in daemons:
        daemon.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.proc.wait(timeout=5)


@dataclass
class SparkCluster:
    """A running master, workers and Spark Connect server; `stop()` (or the with-block) ends them."""

    base_dir: Path
    master_port: int
    connect_port: int
    warehouse_dir: Path
    daemons: list[Daemon] = field(default_factory=list)
    start_seconds: dict[str, float] = field(default_factory=dict)
    #: the Connect server's spark-class arguments, to restart it on the same port
    connect_args: list[str] = field(default_factory=list)
    #: how many times the Connect server was started again (clients of an older one are stale)
    restarts: int = 0
    #: how the Connect server is started: one of `CONNECT_MODES`
    connect_mode: str = "server"
    #: JVM options by role (`start`'s `java_options`)
    java_options: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def connect_url(self) -> str:
        return f"sc://127.0.0.1:{self.connect_port}"

    @property
    def connect_daemon(self) -> Daemon:
        return next(d for d in self.daemons if d.name == "connect")

    # ------------------------------------------------------------------ start
    @classmethod
    def start(
        cls,
        base_dir: str | Path,
        workers: int = 2,
        worker_memory: str = "1g",
        # The Connect server is the driver of every session: with Delta's log caches and the
        # Hive metastore it held 1.27 GB resident at the end of the suite, near a 1 GB heap,
        # where the JVM spends its time collecting instead of answering.
        driver_memory: str = "2g",
        ready_timeout: float = READY_TIMEOUT,
        extra_conf: dict[str, str] | None = None,
        jars: Sequence[str | Path] = (),
        connect_mode: str = "server",
        java_options: Mapping[str, Sequence[str]] | None = None,
    ) -> SparkCluster:
        """Start everything under `base_dir` (logs, warehouse, metastore, work dirs) and wait for it.

        `jars` go on the Connect server's and its executors' class path (`--jars`); with Delta's
        (`delta_jars`), pass `extra_conf=DELTA_CONF`. `connect_mode`: one of `CONNECT_MODES`.
        `java_options`: extra options of the JVMs of each role in `JVM_ROLES` (none by default, so
        the benches' figures are the JVM's defaults')."""
        unknown = set(java_options or {}) - set(JVM_ROLES)
        if unknown:
            raise ClusterError(f"java_options for {sorted(unknown)}: roles are {', '.join(JVM_ROLES)}")
        if connect_mode not in CONNECT_MODES:
            raise ClusterError(f"connect_mode {connect_mode!r}: use one of {', '.join(CONNECT_MODES)}")
        base = Path(base_dir).resolve()
        base.mkdir(parents=True, exist_ok=True)
        cluster = cls(
            base_dir=base,
            master_port=free_port(),
            connect_port=free_port(),
            warehouse_dir=base / "warehouse",
            connect_mode=connect_mode,
            java_options={role: tuple(options) for role, options in (java_options or {}).items()},
        )
        try:
            cluster._start(workers, worker_memory, driver_memory, ready_timeout, extra_conf or {}, jars)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _env(self, role: str = "daemon") -> dict[str, str]:
        """The environment of a JVM of `role`: Spark's launcher gives SPARK_DAEMON_JAVA_OPTS to the
        Connect server too (a special class to it, as the Thrift server), so the daemons' options
        go there only for the master and workers."""
        env = dict(os.environ)
        options = self._java_options("daemon") if role == "daemon" else ""
        home = spark_home()
        env.update(
            SPARK_HOME=str(home),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.base_dir / "logs"),
            SPARK_LOCAL_DIRS=str(self.base_dir / "local"),
            SPARK_CONF_DIR=str(self.base_dir / "conf"),
            SPARK_NO_DAEMONIZE="1",
            # The JVMs' temporary files (Hive's per-session `<uuid>_resources`, Connect's
            # `artifacts-*`, native libraries unpacked) go under the cluster's directory, not /tmp,
            # where each start left a few behind.
            SPARK_DAEMON_JAVA_OPTS=f"-Djava.io.tmpdir={self.base_dir / 'tmp'}{options}",
        )
        java = java_home()
        if java:
            env["JAVA_HOME"] = java
        env.pop("PYSPARK_GATEWAY_PORT", None)
        # the `plugin` mode's driver is Python: the classic pyspark of this interpreter, not a client
        env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE"):
            env.pop(name, None)
        return env

    def _java_options(self, role: str) -> str:
        """The role's `java_options` as a suffix of its JVMs' options (each after a space)."""
        return "".join(f" {option}" for option in self.java_options.get(role, ()))

    def _spawn(self, name: str, args: list[str], env: dict[str, str], cwd: Path) -> Daemon:
        log = self.base_dir / "logs" / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,  # its own process group, stopped as a whole
            )
        daemon = Daemon(name, proc, log)
        self.daemons.append(daemon)
        return daemon

    def _start(
        self,
        workers: int,
        worker_memory: str,
        driver_memory: str,
        timeout: float,
        extra: dict[str, str],
        jars: Sequence[str | Path] = (),
    ) -> None:
        for sub in ("logs", "local", "conf", "work", "metastore", "tmp"):
            (self.base_dir / sub).mkdir(exist_ok=True)
        self.warehouse_dir.mkdir(exist_ok=True)
        env = self._env()
        began = time.monotonic()
        master = self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.master_port),
                "--webui-port", str(free_port()),
            ],
            env,
            self.base_dir,
        )  # fmt: skip
        master.wait_ready(MASTER_READY, timeout)
        started = []
        for i in range(workers):
            work = self.base_dir / "work" / f"worker{i}"
            work.mkdir(parents=True, exist_ok=True)
            started.append(
                self._spawn(
                    f"worker{i}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1",
                        "--port", str(free_port()),
                        "--cores", "1",
                        "--memory", worker_memory,
                        "--webui-port", str(free_port()),
                        "--work-dir", str(work),
                        self.master_url,
                    ],
                    env,
                    work,
                )
            )  # fmt: skip
        for daemon in started:
            daemon.wait_ready(WORKER_READY, timeout)
        self.start_seconds["master_and_workers"] = time.monotonic() - began
        metastore = self.base_dir / "metastore"
        conf = {
            "spark.connect.grpc.binding.port": str(self.connect_port),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(self.warehouse_dir),
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={metastore / 'metastore_db'};create=true"
            ),
            # The GC log says, after a slow run, whether the driver was short of heap.
            "spark.driver.extraJavaOptions": (
                f"-Dderby.system.home={metastore} -Xlog:gc:file={self.base_dir / 'logs' / 'connect-gc.log'}"
                f" -Djava.io.tmpdir={self.base_dir / 'tmp'}{self._java_options('driver')}"
            ),
            "spark.executor.extraJavaOptions": (
                f"-Djava.io.tmpdir={self.base_dir / 'tmp'}{self._java_options('executor')}"
            ),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": driver_memory,
            "spark.executor.memory": worker_memory,
            "spark.executor.cores": "1",
            "spark.cores.max": str(workers),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": str(max(2, workers)),
            "spark.local.dir": str(self.base_dir / "local"),
            **extra,
        }
        args = ["org.apache.spark.deploy.SparkSubmit", "--master", self.master_url]
        if self.connect_mode == "server":
            args += ["--class", CONNECT_CLASS]
        else:
            conf.update(PLUGIN_CONF)
        if jars:
            args += ["--jars", ",".join(str(Path(j).resolve()) for j in jars)]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        args.append("spark-internal" if self.connect_mode == "server" else str(PLUGIN_DRIVER))
        self.connect_args = args
        connect_began = time.monotonic()
        connect = self._spawn("connect", args, self._env("driver"), metastore)
        connect.wait_ready(CONNECT_READY, timeout)
        self.start_seconds["connect"] = time.monotonic() - connect_began
        self.start_seconds["total"] = time.monotonic() - began
        (self.base_dir / "cluster.json").write_text(
            json.dumps({"master_port": self.master_port, "connect_port": self.connect_port})
        )

    @classmethod
    def attach(cls, base_dir: str | Path) -> SparkCluster:
        """A cluster another process started under `base_dir` (its ports from cluster.json); this
        object does not own its processes: `stop()` leaves them, and it cannot restart them."""
        base = Path(base_dir).resolve()
        ports = json.loads((base / "cluster.json").read_text())
        return cls(base, ports["master_port"], ports["connect_port"], base / "warehouse")

    def kill_connect(self) -> None:
        """SIGKILL the Spark Connect server (the driver: every session and running statement)."""
        connect = self.connect_daemon
        connect.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            connect.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _group_pids(connect.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.daemons.remove(connect)

    def start_connect(self, timeout: float = READY_TIMEOUT) -> float:
        """Start the Connect server again on the same port, metastore and warehouse; seconds taken."""
        began = time.monotonic()
        deadline = began + 30
        while time.monotonic() < deadline:  # the killed server's port is free again shortly
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                # as the JVM binds its listener: with SO_REUSEADDR, so the dead server's connections
                # left in TIME_WAIT (60 s) do not hold the port; only a live listener does (without
                # it this loop waited its whole 30 s: the restart took 44.6 s instead of ~15)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind(("127.0.0.1", self.connect_port))
                    break
                except OSError:
                    time.sleep(0.2)
        connect = self._spawn("connect", self.connect_args, self._env("driver"), self.base_dir / "metastore")
        connect.wait_ready(CONNECT_READY, timeout)
        self.restarts += 1
        return time.monotonic() - began

    # ------------------------------------------------------------------ use
    def session(self, **options: str) -> Any:
        """A Spark Connect client session on this cluster (a new one per call), opened as the
        provider opens its own (`spark.adapter.open_session`)."""
        url = self.connect_url + "".join(f";{k}={v}" for k, v in options.items())
        return open_session(url)

    def rss_mib(self) -> dict[str, float]:
        """Resident memory of each process group (executors counted with their worker), in MiB."""
        return {d.name: round(d.rss_kib() / 1024, 1) for d in self.daemons}

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds each process group has used so far (executors counted with their worker)."""
        return {d.name: round(d.cpu_seconds(), 1) for d in self.daemons}

    def gc_pauses(self) -> tuple[int, float]:
        """The Connect server's garbage-collection pauses since it (re)started: count, seconds."""
        log = self.base_dir / "logs" / "connect-gc.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        pauses = [float(ms) for ms in re.findall(r"Pause .* (\d+(?:\.\d+)?)ms$", text, re.MULTILINE)]
        return len(pauses), round(sum(pauses) / 1000, 2)

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop the Connect server, then the workers (their executors with them) and the master."""
        connect = [d for d in self.daemons if d.name == "connect"]
        stop_all(connect, grace=5.0)  # the driver first, so the workers need not wait for it
        stop_all([d for d in self.daemons if d.name != "connect"], grace=5.0)
        self.daemons.clear()

    def __enter__(self) -> SparkCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def running_cluster(base_dir: str | Path, **kwargs: Any) -> Iterator[SparkCluster]:
    """`SparkCluster.start(...)` as a context manager."""
    cluster = SparkCluster.start(base_dir, **kwargs)
    try:
        yield cluster
    finally:
        cluster.stop()

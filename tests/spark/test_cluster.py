"""The session cluster itself: really distributed (two executors), answers SQL through Connect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_cluster_runs_sql_on_two_executors(spark_cluster, spark) -> None:
    assert spark.sql("SELECT sum(id) AS s FROM range(1, 1001)").collect()[0]["s"] == 500500
    # a job of 4 tasks on the cluster's executors (two workers of one core each)
    parts = spark.sql(
        "SELECT count(DISTINCT p) AS n FROM (SELECT spark_partition_id() AS p FROM range(0, 1000, 1, 4))"
    ).collect()[0]["n"]
    assert parts == 4
    assert set(spark_cluster.rss_mib()) == {"master", "worker0", "worker1", "connect"}
    assert all(mib > 50 for mib in spark_cluster.rss_mib().values())


def test_the_jvms_temporary_files_stay_in_the_cluster_directory(spark_cluster, spark) -> None:
    # Hive's per-session `<uuid>_resources` directory is made in java.io.tmpdir when the Connect
    # server's catalog starts: under the cluster's own directory, where stopping it leaves nothing
    # in /tmp (before, every cluster start left a few directories there).
    spark.sql("SHOW DATABASES").collect()
    kept = {p.name for p in (spark_cluster.base_dir / "tmp").iterdir()}
    assert any(name.endswith("_resources") for name in kept), kept


def codegen_lines(cluster) -> int:
    """How many classes the Connect server's driver compiled so far (Spark logs each at INFO)."""
    return (cluster.base_dir / "logs" / "connect.log").read_text(errors="replace").count("Code generated")


def test_a_new_session_compiles_again_only_on_an_isolating_server(spark_cluster) -> None:
    # Spark's launcher (`server`) gives each Connect session a class loader of its own, and the
    # generated-code cache is keyed by class loader: each new session (each operator call) compiles
    # its plan again. The `plugin` server's sessions share one: the second session compiles nothing.
    query = (
        "SELECT k % 7919 AS g, count(*) AS n, sum(v) AS s FROM "
        "(SELECT id AS k, id * 3 AS v FROM range(0, 20000, 1, 2)) GROUP BY 1 ORDER BY 1 LIMIT 3"
    )
    compiled = []
    for _ in range(2):
        session = spark_cluster.session()
        try:
            before = codegen_lines(spark_cluster)
            rows = session.sql(query).collect()
            compiled.append(codegen_lines(spark_cluster) - before)
        finally:
            session.stop()
        # k = 0, 7919, 15838 in group 0: 3 rows, sum 3 * 23757
        assert (rows[0]["g"], rows[0]["n"], rows[0]["s"]) == (0, 3, 71271)
    assert compiled[0] > 0, compiled
    if spark_cluster.connect_mode == "plugin":
        assert compiled[1] == 0, compiled
    else:
        assert compiled[1] > 0, compiled


def jvm_options(pgid: int) -> dict[str, list[str]]:
    """The JVM options (the arguments before the main class) of each Java process of group `pgid`,
    by main class: read from /proc, not from the cluster's own bookkeeping."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or os.getpgid(int(entry.name)) != pgid:
                continue
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ProcessLookupError):
            continue
        if argv and argv[0].endswith("/java"):
            main = next(i for i, arg in enumerate(argv) if arg.startswith("org.apache.spark."))
            found[argv[main]] = argv[1:main]
    return found


def test_each_jvm_gets_its_roles_options_only(spark_cluster, spark) -> None:
    # Spark's launcher gives the daemons' options (SPARK_DAEMON_JAVA_OPTS) to the Connect server too:
    # the cluster keeps them to the master and workers, so a C1-only daemon leaves the server on C2.
    spark.sql("SELECT count(*) FROM range(0, 100, 1, 2)").collect()  # the executors are up
    by_class = {}
    for daemon in spark_cluster.daemons:
        by_class.update(jvm_options(daemon.proc.pid))
    roles = {
        "org.apache.spark.deploy.master.Master": "daemon",
        "org.apache.spark.deploy.worker.Worker": "daemon",
        "org.apache.spark.deploy.SparkSubmit": "driver",
        "org.apache.spark.executor.CoarseGrainedExecutorBackend": "executor",
    }
    assert set(by_class) == set(roles), by_class
    everyone = {option for options in spark_cluster.java_options.values() for option in options}
    for main, options in by_class.items():
        own = set(spark_cluster.java_options.get(roles[main], ()))
        assert own <= set(options), (main, options)
        assert not (everyone - own) & set(options), (main, options)

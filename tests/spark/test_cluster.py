"""The session cluster itself: really distributed (two executors), answers SQL through Connect."""

from __future__ import annotations

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

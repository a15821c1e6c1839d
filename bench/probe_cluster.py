"""The probes' cluster: one Spark standalone cluster with Delta (and Iceberg's JDBC catalog when
asked), the bench's source table, and the Airflow connections the operators use, set up as
bench_delta.py does, so every probe measures on the same data and cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_delta import catalog_database, source_sql
from scratch import scratch_dir

from airflow_idempotent.spark import cluster as clusters
from airflow_idempotent.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Probe:
    """A started probe cluster: the cluster, a long-lived session on it, the scratch directory,
    and the driver's UI (``http://127.0.0.1:<port>``; "" when off)."""

    cluster: clusters.SparkCluster
    spark: Any
    work: Path
    ui: str


def probe_cluster(
    stack: contextlib.ExitStack,
    prefix: str,
    formats: Sequence[str],
    rows: int = 1_000_000,
    ui: bool = False,
    connect_mode: str = "plugin",
) -> Probe:
    """Start the cluster (stopped, with its session and catalog database, when `stack` closes),
    create the bench's source for a window of `rows` rows, and point the ``bench_spark`` and
    history connections at it. `prefix` names the scratch directory and the catalog database."""
    work = scratch_dir(f"{prefix}-")
    conf = dict(clusters.DELTA_CONF)
    if "iceberg" in formats:
        conf.update(
            clusters.iceberg_conf(stack.enter_context(catalog_database(prefix)), "postgres", work / "ice")
        )
    address = ""
    if ui:
        port = free_port()
        conf.update({"spark.ui.enabled": "true", "spark.ui.port": str(port)})
        address = f"http://127.0.0.1:{port}"
    jars = clusters.delta_jars(os.environ.get("IDEM_SPARK_JARS") or ROOT / clusters.SPARK_JARS_DIR)
    t0 = time.monotonic()
    cluster = clusters.SparkCluster.start(
        work / "spark", extra_conf=conf, jars=jars, connect_mode=connect_mode
    )
    stack.callback(cluster.stop)
    print(f"cluster started in {time.monotonic() - t0:.1f} s; UI {address or 'off'}", flush=True)
    spark = cluster.session()
    stack.callback(spark.stop)
    spark.sql("DROP TABLE IF EXISTS bench_sales")
    spark.sql(source_sql(rows))
    os.environ["AIRFLOW_CONN_BENCH_SPARK"] = json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": cluster.connect_port}
    )
    os.environ["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = json.dumps(
        {"conn_type": "sqlite", "host": str(work / "history.db")}
    )
    return Probe(cluster, spark, work, address)


def chosen(paths: dict[str, Any], only: str | None) -> dict[str, Any]:
    """The variants `only` names (comma-separated, each ``name`` or ``format:name``); all without."""
    if not only:
        return paths
    keep = set(only.split(","))
    return {k: v for k, v in paths.items() if k.split(":")[1] in keep or k in keep}

"""A Spark Connect server run as an ordinary driver: `spark-submit` this file with
`spark.plugins=org.apache.spark.sql.connect.SparkConnectPlugin` (`SparkCluster.start(connect_mode="plugin")`).

`SparkConnectServer`, the stock launcher, forces artifact isolation on: each Connect session then
has a class loader of its own on the driver and the executors, Spark's generated-code cache (keyed
by class loader) misses on each new session, and every operator call (a session of its own)
compiles its scan, shuffle and writer again. Started as a plugin of this driver, the server keeps
the driver's conf (`spark.sql.artifact.isolation.enabled=false` given by the launcher), so its
sessions share one class loader and the compiled code. Standalone on purpose (no package imports):
spark-submit runs it with the Python of `PYSPARK_PYTHON`.
"""

from __future__ import annotations

import contextlib
import signal
import sys

#: The line the launcher waits for (`cluster.CONNECT_READY` is its prefix).
READY = "Spark Connect server started (as a plugin of a spark-submit driver)"


def main() -> None:
    from pyspark.sql import SparkSession

    # the plugin starts the Connect service while the SparkContext starts, before getOrCreate returns
    spark = SparkSession.builder.getOrCreate()
    print(READY, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    with contextlib.suppress(Exception):  # the JVM (same process group) may be gone already
        spark.stop()


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main()
    sys.exit(0)

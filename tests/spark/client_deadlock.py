"""Run as `python -m tests.spark.client_deadlock URL MODE`: sessions opened by MODE ("provider":
`spark.adapter.open_session`; "pyspark": pyspark's defaults), with the garbage collector made to
run at the one moment pyspark 4.1's Connect client deadlocks on: in a thread its release pool is
starting, while a finished session waits in a reference cycle. Prints "done" if it got through.

The collection is placed there on purpose (a wrapper of the thread's first step); in the suite's
CI run the collector picked that moment by itself, after about 30 Spark tests.
"""

from __future__ import annotations

import gc
import sys
import threading
import uuid
from typing import Any

from airflow_idempotent.spark.adapter import SparkEngine, open_session

ROUNDS = 3


def main(url: str, mode: str) -> None:
    from pyspark.sql import SparkSession

    def session() -> Any:
        full = SparkEngine(url).session_url(str(uuid.uuid4()))
        return open_session(full) if mode == "provider" else SparkSession.builder.remote(full).create()

    gc.disable()  # the collector runs only where it is placed below
    armed = threading.Event()
    first_step = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def collecting_first_step(thread: threading.Thread) -> None:
        if armed.is_set() and thread.name.startswith("ThreadPoolExecutor"):
            gc.collect()
        first_step(thread)

    threading.Thread._bootstrap_inner = collecting_first_step  # type: ignore[attr-defined]

    class Cycle:
        """Holds a finished session in a reference cycle: only the collector frees it."""

        def __init__(self, held: Any) -> None:
            self.held, self.me = held, self

    steady = session()
    for n in range(ROUNDS):
        done = session()
        done.sql("SELECT 1").collect()
        done.stop()
        Cycle(done)
        del done
        print(f"round {n + 1}: collecting as the release pool starts a thread", flush=True)
        armed.set()
        steady.sql("SELECT id FROM range(10)").collect()
        armed.clear()
        print(f"round {n + 1} of {ROUNDS}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""Run one month overwrite of a payouts table and crash it at a step of the protocol.

    python -m tests.spark.crash_writer <conn_id> <table> <step> <policy> [kill|after=S|pause=FILE] [slow=S]

At `step`: `kill` (default) SIGKILLs this process there; `after=S` SIGKILLs it S seconds later
(while the next statement runs on the server); `mark=FILE` creates FILE and goes on; `pause=FILE`
creates FILE and sleeps 20 s (the test kills the Connect server meanwhile). `slow=S` holds the
month's SELECT at least S seconds in the cluster (`slow_sql`: a statement the server still runs
after its client died). The test checks what the crash left, then reruns the write itself.

With IDEM_WRITER_WAIT=1 the writer imports everything (Airflow and the provider: 4-9 s on a
loaded 2-core machine), then waits for a line on stdin before writing: a test starts it first and
sets its table up meanwhile.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.spark import steps
from tests.spark.payouts_spark import START, context, operator


def slow_sql(seconds: float) -> str:
    """The month's SELECT, held at least `seconds` on the server by a scalar subquery whose one task
    sleeps (`reflect` of Thread.sleep; the bound it gives, 4 - 1000, keeps every row). It replaced
    sha2 over 20M ids, meant as ~12 s: without generated code and on C1 that took 88 s and 70
    executor CPU-s at load 6, and a killed task's zombie ran it to its end beside the next steps.
    A sleep holds the statement on the server as long, for a fixed time and no CPU; an interrupt
    (`switch._interrupt`) ends it as it ended the computation."""
    sleep = f"reflect('java.lang.Thread', 'sleep', CAST({int(seconds * 1000)} AS BIGINT))"
    return (
        f"{PAYOUT_SQL} AND s.sale_id > (SELECT max(length(z)) - 1000 FROM (SELECT {sleep} AS z "
        "FROM range(0, 1, 1, 1)))"
    )


def main() -> None:
    conn_id, table, step, policy = sys.argv[1:5]
    action = sys.argv[5] if len(sys.argv) > 5 else "kill"
    slow = [float(a.split("=", 1)[1]) for a in sys.argv[6:] if a.startswith("slow=")]

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def at(name: str) -> None:
        if name != step:
            return
        if action == "kill":
            die()
        elif action.startswith("after="):
            threading.Timer(float(action.split("=", 1)[1]), die).start()
        elif action.startswith("mark="):
            Path(action.split("=", 1)[1]).write_text(name)
        elif action.startswith("pause="):
            Path(action.split("=", 1)[1]).write_text(name)
            time.sleep(20)

    steps.step_hook = at
    # the test's go, once its table is set up; no go (the test ended or failed first): write nothing
    if os.environ.get("IDEM_WRITER_WAIT") == "1" and sys.stdin.readline().strip() != "go":
        return
    # the sleep's `reflect` is not deterministic: allowed, as the lint says (the rows are the month's)
    extra = {"sql": slow_sql(slow[0]), "allow_functions": ["reflect"]} if slow else {}
    operator(conn_id, table, granularity="month", parameters={"policy_version": policy}, **extra).execute(
        context(START)
    )
    print("finished without crashing at step", step)


if __name__ == "__main__":
    main()

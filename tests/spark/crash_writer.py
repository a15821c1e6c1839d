"""Run one month overwrite of a payouts table and SIGKILL this process at a step of the protocol.

    python -m tests.spark.crash_writer <conn_id> <table> <step> <policy>

The test that starts it checks what the crash left, then reruns the write itself.
"""

from __future__ import annotations

import os
import signal
import sys

from airflow_idempotent import partition_switch
from tests.spark.payouts_spark import START, context, operator


def main() -> None:
    conn_id, table, step, policy = sys.argv[1:5]

    def kill_at(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    partition_switch.step_hook = kill_at
    operator(conn_id, table, granularity="month", parameters={"policy_version": policy}).execute(
        context(START)
    )
    print("finished without reaching step", step)


if __name__ == "__main__":
    main()

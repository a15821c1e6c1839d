"""A test DAG for the run history: a plain @task whose process is killed (SIGKILL) mid-try, as
the OOM killer or a lost node would: nothing after the signal runs, so no end is recorded."""

from __future__ import annotations

import os
import signal

import pendulum
from airflow.sdk import DAG, task

with DAG(
    dag_id="killed_history",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
    catchup=False,
):

    @task
    def killed() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    killed()

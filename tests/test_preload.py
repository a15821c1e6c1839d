"""The listener imports the operators in an Airflow job (scheduler, DAG processor) before it forks
task processes and DAG parsers, and nowhere else (plugins/preload.py)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from airflow.jobs.job import Job
from airflow.sdk.execution_time.task_runner import TaskRunnerMarker
from airflow_idempotent.plugins.listener import history_listener

def loaded():
    return "airflow_idempotent.operators" in sys.modules

before = loaded()
history_listener.on_starting(component=TaskRunnerMarker())
after_task = loaded()
history_listener.on_starting(component=object.__new__(Job))  # a job, without its database row
print(before, after_task, loaded())
"""


def test_a_job_starting_imports_the_operators_and_a_task_starting_does_not() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "False", "True"]

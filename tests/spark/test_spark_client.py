"""The provider's Spark Connect sessions cannot deadlock the process (pyspark 4.1's client can).

tests/spark/client_deadlock.py places a garbage collection where pyspark 4.1's Connect client
deadlocks: pyspark's default sessions hang there (the control: the placement reaches the bug),
the provider's (`spark.adapter.open_session`: executions not reattachable) get through.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from packaging.version import Version

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


COLLECTING = "round 1: collecting as the release pool starts a thread"


def run(url: str, mode: str, timeout: float, grace: float | None = None) -> tuple[bool, str]:
    """Whether the script finished, and its output. It is killed after `timeout` seconds, or
    `grace` seconds after it printed that round 1 collects (a query answers in well under one),
    so the control does not wait out the whole timeout to show a hang."""
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.client_deadlock", url, mode],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            start_new_session=True,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
        reader.start()
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if grace is not None and any(line.rstrip() == COLLECTING for line in lines):
                deadline = min(deadline, time.monotonic() + grace)
                grace = None
            time.sleep(0.2)
        finished = proc.poll() is not None
        if not finished:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)
        out = "".join(lines)
        errors.seek(0)
        if finished:
            assert proc.returncode == 0, out + errors.read()
    return finished, out


def test_the_providers_sessions_get_through(spark_cluster) -> None:
    finished, out = run(spark_cluster.connect_url, "provider", timeout=180)
    assert finished, f"the provider's sessions deadlocked:\n{out}"
    assert out.splitlines()[-2:] == ["round 3 of 3", "done"], out


def test_pysparks_default_sessions_deadlock_there(spark_cluster) -> None:
    import pyspark

    if Version(pyspark.__version__) >= Version("4.2"):
        pytest.skip(f"pyspark {pyspark.__version__} has SPARK-55406: open_session's workaround may go")
    finished, out = run(spark_cluster.connect_url, "pyspark", timeout=120, grace=20)
    assert not finished, f"pyspark's default sessions got through:\n{out}"
    # it reached the placed collection, and never came back from it
    assert out.splitlines()[-1] == COLLECTING, out

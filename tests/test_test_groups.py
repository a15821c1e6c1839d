"""tools/test_groups.sh stopped from outside: the running group's leftovers are swept, the run ends.

A stand-in for pytest (a shell script given as PYTEST) starts a process in a process group of its
own, as an end-to-end deployment or a Spark cluster does, and waits. The run is then signalled as
CI or a Ctrl-C would signal it. Whether the stand-in's own process is still alive afterwards is read
from /proc by its pid, which the stand-in writes down, not from the script's output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "test_groups.sh"

STAND_IN = """#!/usr/bin/env bash
trap 'echo torn-down > "{dir}/teardown"; exit 2' INT
setsid sleep 300 &
orphan=$!
sleep 300 &
echo $orphan > "{dir}/orphan"  # written once both children run: the test signals when it appears
wait
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_for(path: Path, seconds: float = 20) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.1)
    raise AssertionError(f"{path} was never written")


@pytest.mark.parametrize(
    ("sig", "whole_group", "code"),
    [(signal.SIGTERM, False, 143), (signal.SIGINT, True, 130), (signal.SIGTERM, True, 143)],
    ids=["TERM-to-script", "INT-to-group", "TERM-to-group"],
)
def test_a_signalled_run_sweeps_its_group_and_stops(
    tmp_path: Path, sig: signal.Signals, whole_group: bool, code: int
) -> None:
    stand_in = tmp_path / "pytest.sh"
    stand_in.write_text(STAND_IN.format(dir=tmp_path))
    stand_in.chmod(0o755)
    env = {
        **os.environ,
        "PYTEST": str(stand_in),
        "JOBS": "1",
        "E2E_JOBS": "1",
        "RESULTS": str(tmp_path / "results"),
    }
    run = subprocess.Popen(
        ["bash", str(SCRIPT)],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    orphan = int(wait_for(tmp_path / "orphan"))
    try:
        assert alive(orphan)
        if whole_group:
            os.killpg(run.pid, sig)
        else:
            run.send_signal(sig)
        out, _ = run.communicate(timeout=90)
        assert run.returncode == code, out
        assert not alive(orphan), f"process {orphan} outlived the run:\n{out}"
        assert "group 1-dagrun" not in out, f"the run went on to the next group:\n{out}"
        if sig == signal.SIGINT or not whole_group:
            assert (tmp_path / "teardown").read_text().strip() == "torn-down", out
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)


BESIDE_STAND_IN = """#!/usr/bin/env bash
case "$*" in *"not dagrun"*) exit 0 ;; esac  # the fast group passes at once
trap 'echo torn-down >> "{dir}/teardown"; exit 2' INT
setsid sleep 300 &
echo $! > "{dir}/orphan-$$"
sleep 300 &
wait
"""


def test_a_run_signalled_while_two_groups_run_side_by_side_sweeps_both(tmp_path: Path) -> None:
    """The DAG-run and Spark groups run at once: a SIGTERM then tears both down and sweeps what
    each started, and the run goes no further."""
    stand_in = tmp_path / "pytest.sh"
    stand_in.write_text(BESIDE_STAND_IN.format(dir=tmp_path))
    stand_in.chmod(0o755)
    env = {**os.environ, "PYTEST": str(stand_in), "JOBS": "1", "E2E_JOBS": "1"}
    env["RESULTS"] = str(tmp_path / "results")
    run = subprocess.Popen(
        ["bash", str(SCRIPT)], env=env, start_new_session=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    orphans: list[int] = []
    try:
        deadline = time.monotonic() + 20
        while len(list(tmp_path.glob("orphan-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        orphans = [int(wait_for(path)) for path in sorted(tmp_path.glob("orphan-*"))]
        assert len(orphans) == 2 and all(alive(pid) for pid in orphans)
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=90)
        assert run.returncode == 143, out
        assert [pid for pid in orphans if alive(pid)] == [], out
        assert (tmp_path / "teardown").read_text().split() == ["torn-down", "torn-down"], out
        assert "group 1-dagrun (limit" in out and "group 2-spark (limit" in out, out
        assert "group 3-e2e" not in out, f"the run went on to the next group:\n{out}"
    finally:
        for pid in orphans:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)


ORDER_STAND_IN = """#!/usr/bin/env bash
case "$*" in
  *"and not exhaustive"*) group=spark ;;
  *"-m dagrun"*) group=dagrun ;;
  *"--ignore"*) group=e2e ;;
  *test_celery_cluster*) group=celery ;;
  *) group=fast ;;
esac
echo "start $group $(date +%s.%N)" >> "{dir}/events"
[[ $group == spark ]] && sleep 4
echo "end $group $(date +%s.%N)" >> "{dir}/events"
[[ $group == e2e ]] && exit {e2e_rc}
exit 0
"""


@pytest.mark.parametrize("e2e_rc", [0, 1])
def test_the_end_to_end_group_runs_beside_the_spark_groups_last_minutes(tmp_path: Path, e2e_rc: int) -> None:
    """After the DAG runs and the Celery and load files, the end-to-end group starts while the Spark
    group still runs; the run waits for both and reports each one's result as it ends."""
    stand_in = tmp_path / "pytest.sh"
    stand_in.write_text(ORDER_STAND_IN.format(dir=tmp_path, e2e_rc=e2e_rc))
    stand_in.chmod(0o755)
    env = {**os.environ, "PYTEST": str(stand_in), "JOBS": "1", "E2E_JOBS": "1"}
    env["RESULTS"] = str(tmp_path / "results")
    run = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    events = {}
    for line in (tmp_path / "events").read_text().splitlines():
        kind, group, at = line.split()
        events[kind, group] = float(at)
    assert set(events) == {
        (k, g) for k in ("start", "end") for g in ("fast", "dagrun", "celery", "spark", "e2e")
    }
    assert events["end", "fast"] <= events["start", "spark"]
    assert (
        events["end", "dagrun"] <= events["start", "celery"]
        and events["end", "celery"] <= events["start", "e2e"]
    )
    assert events["start", "e2e"] < events["end", "spark"], "end to end waited for the Spark group"
    assert f"group 3-e2e: rc {e2e_rc} in" in run.stdout and "group 2-spark: rc 0 in" in run.stdout, run.stdout
    # reported when it ended, not when the Spark group did: its own time
    assert run.stdout.index("group 3-e2e: rc") < run.stdout.index("group 2-spark: rc"), run.stdout
    assert run.returncode == e2e_rc, run.stdout
    if e2e_rc:
        assert run.stdout.rstrip().endswith("[test] failed groups: 3-e2e"), run.stdout

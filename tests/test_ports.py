"""The test servers' ports: no port is handed to two processes while its claim lives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TAKE = """
import json, sys
from airflow_idempotent.testing.ports import claim, free_port
if sys.argv[1] == "take":
    print(json.dumps([free_port() for _ in range(int(sys.argv[2]))]))
else:
    print(json.dumps([claim(int(p)) for p in sys.argv[2:]]))
"""


def run(tmp: Path, *args: str) -> list[object]:
    """Run TAKE in a fresh interpreter whose temporary directory (the claims' home) is `tmp`."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    command = [sys.executable, "-c", TAKE, *args]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def test_four_processes_at_once_never_share_a_port(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    command = [sys.executable, "-c", TAKE, "take", "60"]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    ports = [p for proc in procs for p in json.loads(proc.communicate(timeout=60)[0])]
    assert len(ports) == 240 and len(set(ports)) == 240
    assert len(list((tmp_path / "airflow-idempotent-ports").iterdir())) == 240


def test_a_port_handed_out_is_refused_to_another_process(tmp_path: Path) -> None:
    taken = run(tmp_path, "take", "3")
    assert run(tmp_path, "claim", *map(str, taken)) == [False, False, False]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fresh = [p for p in run(elsewhere, "take", "3") if p not in taken]  # claimed only in another home
    assert fresh and run(tmp_path, "claim", *map(str, fresh)) == [True] * len(fresh)
    assert run(tmp_path, "claim", *map(str, fresh)) == [False] * len(fresh)

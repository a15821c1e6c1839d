"""tools/machine.sh as `make test` runs it: idempotent, hands off what it did not start, inert without root.

The services on the default ports are already up here (the script ran before pytest), so every run
below must find them ready and change nothing there. Redis on a free port of this test's own stands
in for "a server that is down" and "a server someone else started": it is the one service cheap to
start and stop by its process group.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from airflow_idempotent.testing.ports import free_port

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "machine.sh"
ACTIONS = ("installing", "starting", "creating", "apt-get", "trust authentication", "root over TCP")


def run_machine(
    tmp_path: Path,
    *,
    redis_port: int | None = None,
    user: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    env = {**os.environ, "IDEM_MACHINE_STATE": str(tmp_path / "state"), **(extra_env or {})}
    if redis_port is not None:
        env["IDEM_MACHINE_REDIS_PORT"] = str(redis_port)
    cmd = ["bash", str(SCRIPT)]
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)


def redis_config(port: int, key: str) -> str | None:
    out = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), "config", "get", key],
        capture_output=True,
        text=True,
        timeout=10,
    )
    lines = out.stdout.splitlines()
    return lines[1] if out.returncode == 0 and len(lines) == 2 else None


def shutdown_redis(port: int) -> None:
    subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), "shutdown", "nosave"],
        capture_output=True,
        timeout=10,
    )


@pytest.fixture
def foreign_redis(tmp_path: Path):
    """A Redis this script did not start, keeping snapshots on disk (not as the suite expects)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "60 1",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(100):
            if redis_config(port, "save") is not None or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert redis_config(port, "save") == "60 1", "the stand-in Redis did not start"
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_second_run_changes_nothing(tmp_path: Path) -> None:
    result = run_machine(tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for service in ("PostgreSQL", "MariaDB", "Redis"):
        assert f"[machine] {service} is up and ready" in lines
    assert not [line for line in lines if any(word in line for word in ACTIONS)]
    assert not (tmp_path / "state").exists()


def test_a_full_disk_stops_it_first_naming_the_free_space_and_the_fix(tmp_path: Path) -> None:
    """Asked for more room than the filesystem has, it stops before any package or server."""
    stat = os.statvfs(tmp_path)
    free_mb = stat.f_bavail * stat.f_frsize // 2**20
    port = free_port()
    need = {"IDEM_MACHINE_NEED_MB": str(free_mb + 10_000), "TMPDIR": str(tmp_path)}
    result = run_machine(tmp_path, redis_port=port, extra_env=need)
    assert result.returncode == 1
    said = int(result.stderr.split("only ")[1].split(" MB free")[0])
    assert abs(said - free_mb) < 2_000  # others write to this disk meanwhile
    assert f"needs about {free_mb + 10_000} MB" in result.stderr
    assert "uv cache prune" in result.stderr
    assert result.stdout == ""  # nothing installed, configured or started
    assert redis_config(port, "save") is None
    assert not (tmp_path / "state").exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to drop to nobody"
)
def test_without_root_nothing_changes_and_the_command_is_named(tmp_path: Path) -> None:
    port = free_port()
    result = run_machine(tmp_path, redis_port=port, user="nobody")
    assert result.returncode == 1
    assert "not root, so nothing was changed" in result.stderr
    assert f"sudo bash {SCRIPT}" in result.stderr
    assert f"Redis at 127.0.0.1:{port}" in result.stderr
    assert redis_config(port, "save") is None  # nothing was started
    assert not (tmp_path / "state").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the script starts servers only as root")
def test_a_server_it_did_not_start_is_left_alone(tmp_path: Path, foreign_redis: int) -> None:
    result = run_machine(tmp_path, redis_port=foreign_redis)
    assert result.returncode == 1
    assert "did not install or start it, so it leaves it alone" in result.stderr
    assert "config set save" in result.stderr
    assert redis_config(foreign_redis, "save") == "60 1"


@pytest.mark.skipif(os.geteuid() != 0, reason="the script starts servers only as root")
def test_a_down_server_is_started_as_the_suite_expects_then_left_running(tmp_path: Path) -> None:
    port = free_port()
    try:
        first = run_machine(tmp_path, redis_port=port)
        assert first.returncode == 0, first.stderr
        assert "[machine] starting Redis" in first.stdout
        assert redis_config(port, "save") == ""
        assert redis_config(port, "appendonly") == "no"
        assert (tmp_path / "state" / "redis").exists()
        second = run_machine(tmp_path, redis_port=port)
        assert second.returncode == 0, second.stderr
        assert "starting" not in second.stdout
    finally:
        shutdown_redis(port)


def pg_setting(port: int, name: str) -> str:
    out = subprocess.run(
        [
            "psql",
            "-w",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-tAc",
            f"show {name}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_postgresql_it_runs_allows_the_connections_the_groups_open() -> None:
    """The end-to-end deployments beside the Spark group went past the default 100 under load."""
    assert int(pg_setting(5432, "max_connections")) >= 300


@pytest.fixture
def foreign_postgres(tmp_path: Path):
    """A PostgreSQL this script did not start, as the suite expects but with the default 100
    connections: its own data directory and port, run as the postgres user (initdb refuses root)."""
    (bindir,) = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1:]
    data = Path(tempfile.mkdtemp(prefix="idem_foreign_pg_"))
    shutil.chown(data, "postgres", "postgres")
    port = free_port()

    def as_postgres(*args: str) -> None:
        proc = subprocess.run(
            ["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr

    as_postgres(str(bindir / "initdb"), "-A", "trust", "-U", "postgres", "-D", str(data / "db"))
    opts = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c max_connections=100"
    as_postgres(
        str(bindir / "pg_ctl"), "-D", str(data / "db"), "-o", opts, "-l", str(data / "log"), "-w", "start"
    )
    try:
        for db in ("test", "root"):
            as_postgres(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), db)
        yield port
    finally:
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(bindir / "pg_ctl"),
                "-D",
                str(data / "db"),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to run a server as postgres"
)
def test_a_foreign_postgresql_with_too_few_connections_is_named_and_left_alone(
    tmp_path: Path, foreign_postgres: int
) -> None:
    result = run_machine(tmp_path, extra_env={"IDEM_MACHINE_PG_PORT": str(foreign_postgres)})
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stdout.splitlines() if "WARNING" in line]
    assert len(warning) == 1, result.stdout
    assert f"127.0.0.1:{foreign_postgres} allows 100 connections" in warning[0]
    assert "set `max_connections = 300` in its postgresql.conf and restart it" in warning[0]
    assert pg_setting(foreign_postgres, "max_connections") == "100"  # left alone
    assert not (tmp_path / "state").exists()

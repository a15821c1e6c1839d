"""One attempt of one task, in a forked child that crashes itself where the scenario says.

The operator object needs no pickling, and the child's rendering of templates never touches the
caller's object. A crash is real: the child sends itself SIGKILL at the chosen point, so nothing
after it runs, no ``finally``, no rollback but the database's own. The child reports over a pipe
(one JSON line per message); its stdout, stderr and logging go to the attempt's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tenacity

from airflow_idempotent.testing.scenarios import Crash, task_kind

__all__ = ["ChildResult", "die", "install_crash", "run_attempt"]

_WRITE_KEYS = frozenset({"delete", "insert", "update", "merge"})


def die(channel: int, crash: Crash, what: str) -> None:
    """In the child: say where it crashes, then SIGKILL itself (nothing after this runs)."""
    os.write(channel, (json.dumps({"status": "crashing", "at": what}) + "\n").encode())
    os.kill(os.getpid(), signal.SIGKILL)


def install_crash(task: Any, crash: Crash, channel: int) -> Callable[[str], None]:
    """Patch (in the child only) the place where `crash` strikes; return the before/after hook."""
    kind = task_kind(task)
    state = {"writes": 0}
    if kind == "project":
        from airflow_idempotent.adapters.base import EngineAdapter

        real_execute = EngineAdapter.execute

        def execute(self: Any, conn: Any, expression: Any, params: Any) -> Any:
            write = getattr(expression, "key", "") in _WRITE_KEYS
            if write:
                state["writes"] += 1
                if crash.point == "before" and state["writes"] == 1:
                    die(channel, crash, f"before {expression.key.upper()} (nothing written)")
            result = real_execute(self, conn, expression, params)
            if write and crash.point == "during" and state["writes"] == crash.statement:
                die(channel, crash, f"after {expression.key.upper()} #{crash.statement}, before commit")
            return result

        EngineAdapter.execute = execute  # type: ignore[method-assign]
        cls = type(task)
        real_write = cls.write

        def write(self: Any, adapter: Any, spec: Any) -> Any:
            result = real_write(self, adapter, spec)
            if crash.point == "after_commit":
                die(channel, crash, "committed, before the history record")
            return result

        cls.write = write  # type: ignore[method-assign]
        return lambda phase: None
    if kind == "sql" and crash.point == "during":
        from airflow.providers.common.sql.hooks.sql import DbApiHook

        real_run = DbApiHook._run_command

        def run_command(self: Any, cur: Any, sql_statement: Any, parameters: Any) -> Any:
            result = real_run(self, cur, sql_statement, parameters)
            state["writes"] += 1
            if state["writes"] == crash.statement:
                die(channel, crash, f"after statement #{crash.statement}, before the hook commits")
            return result

        DbApiHook._run_command = run_command  # type: ignore[method-assign]

    def hook(phase: str) -> None:
        if phase == "before" and crash.point == "before":
            die(channel, crash, "before execute()")
        if phase == "after" and crash.point == "after_commit":
            die(channel, crash, "after execute() returned")

    return hook


def _child(task: Any, context: dict[str, Any], crash: Crash | None, channel: int) -> Any:
    from airflow.sdk.bases.operator import ExecutorSafeguard

    ExecutorSafeguard.test_mode = True  # execute() outside the task runner, on purpose
    task = task.prepare_for_execution()  # what the task runner does: a locked copy
    context["task"] = task
    hook = install_crash(task, crash, channel) if crash is not None else (lambda phase: None)
    task.render_template_fields(context)
    hook("before")
    value = task.execute(context)
    hook("after")
    return value


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)[:2000]


@dataclass
class ChildResult:
    """What an attempt's child reported, its log, and how long it took."""

    status: str  # ok, error, crashed, killed, timeout
    value: Any = None
    error: str = ""
    log: str = ""
    seconds: float = 0.0


def _redirect_output(fd: int) -> None:
    """In the child: send fds 1 and 2, and whatever fds sys.stdout/stderr write to (pytest's capture
    files, the logging handlers' streams), to the attempt's log."""
    targets = {1, 2}
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            targets.add(stream.fileno())  # type: ignore[union-attr]
    for target in targets:
        with contextlib.suppress(OSError):
            os.dup2(fd, target)


def run_attempt(task: Any, context: dict[str, Any], crash: Crash | None, timeout: float) -> ChildResult:
    """Fork; the child renders and executes the task (crashing where told); read what it reported."""
    read_end, write_end = os.pipe()
    log = tempfile.TemporaryFile()  # noqa: SIM115 (the child writes it; closed below)
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)
            _redirect_output(log.fileno())
            value = _child(task, context, crash, write_end)
            os.write(write_end, (json.dumps({"status": "ok", "value": _jsonable(value)}) + "\n").encode())
            code = 0
        except BaseException as err:  # report everything, then leave without running the parent's cleanup
            message = f"{type(err).__name__}: {err}"
            with contextlib.suppress(Exception):
                os.write(
                    write_end, (json.dumps({"status": "error", "error": message[:4000]}) + "\n").encode()
                )
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    os.close(write_end)
    try:
        reported, timed_out = _read_until_closed(read_end, started + timeout)
    finally:
        os.close(read_end)
    if timed_out:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    seconds = time.monotonic() - started
    log.seek(0)
    output = log.read().decode("utf-8", errors="replace")
    log.close()
    messages = [json.loads(line) for line in reported.decode().splitlines() if line.strip()]
    last = messages[-1] if messages else {}
    if timed_out:
        return ChildResult("timeout", error=f"no result after {timeout:.0f}s", log=output, seconds=seconds)
    if os.WIFSIGNALED(status):
        if last.get("status") == "crashing":
            return ChildResult("crashed", error=str(last.get("at")), log=output, seconds=seconds)
        return ChildResult(
            "killed", error=f"killed by signal {os.WTERMSIG(status)}", log=output, seconds=seconds
        )
    if last.get("status") == "ok":
        return ChildResult("ok", value=last.get("value"), log=output, seconds=seconds)
    return ChildResult(
        "error", error=str(last.get("error") or f"exit status {status}"), log=output, seconds=seconds
    )


def _read_until_closed(read_end: int, deadline: float) -> tuple[bytes, bool]:
    """Everything the child writes to the pipe until it closes its end (it exited or was killed), or
    until `deadline` (time.monotonic()): (what it wrote, timed out)."""
    chunks: list[bytes] = []

    def read() -> bool:
        """Wait for the pipe (until the deadline at most) and read it; True once the child closed it."""
        ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        data = os.read(read_end, 65536)
        chunks.append(data)
        return not data

    closed = tenacity.Retrying(
        retry=tenacity.retry_if_result(lambda closed: not closed),
        stop=lambda state: time.monotonic() >= deadline,
        retry_error_callback=lambda state: False,
    )(read)
    return b"".join(chunks), not closed

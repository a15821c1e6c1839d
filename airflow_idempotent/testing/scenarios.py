"""Crash points and scenarios: where an attempt kills itself, and the attempts a check makes.

A scenario is a list of attempts of the whole subject (DAG or task), each running to the end or
crashing one task at a chosen point; `plan` builds the scenarios of a check (every crash point
each writing task supports, or seeded random ones).

Crash points:

``before``
    the project's operators: just before the first write statement (after the lock and the
    checks); any other operator: just before ``execute()``.
``during``
    the project's operators: right after the N-th write statement (DELETE, INSERT, upsert) of
    the transaction, before commit; SQL operators (common-sql hooks) running two or more
    statements: right after the N-th statement, before the hook commits. Not available for a
    single SQL statement (it is atomic) or for Python code.
``after_commit``
    the project's operators: after the write committed, before the history record and before
    the task returns; any other operator: right after ``execute()`` returned.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_idempotent.testing.errors import HarnessError

__all__ = ["CRASH_POINTS", "Crash", "Scenario", "crash_points", "plan", "task_kind"]

CRASH_POINTS: tuple[str, ...] = ("before", "during", "after_commit")


@dataclass(frozen=True)
class Crash:
    """Where an attempt kills itself: a crash point, and for `during` after which write statement."""

    point: str
    statement: int = 1

    def __post_init__(self) -> None:
        if self.point not in CRASH_POINTS:
            raise HarnessError(f"unknown crash point {self.point!r}: use one of {', '.join(CRASH_POINTS)}")
        if self.statement < 1:
            raise HarnessError(f"statement must be >= 1 (got {self.statement})")

    def label(self) -> str:
        if self.point == "during":
            return f"during (after write statement {self.statement})"
        return "after commit" if self.point == "after_commit" else "before the write"


@dataclass(frozen=True)
class Scenario:
    """A named list of attempts of the subject, each run to the end (None) or crashed (task_id, crash)."""

    name: str
    #: per attempt: None (run to the end) or (task_id, crash)
    attempts: tuple[tuple[str, Crash] | None, ...]
    crash_task: str | None = None


def task_kind(task: Any) -> str:
    """project (this package's operators), sql (common-sql hooks) or other."""
    from airflow_idempotent.operators.base import WindowWriteOperator

    if isinstance(task, WindowWriteOperator):
        return "project"
    if hasattr(task, "get_db_hook") and getattr(task, "sql", None):
        return "sql"
    return "other"


def _sql_statements(task: Any) -> int:
    """How many statements a SQL operator runs (a list, or a split string)."""
    sql = getattr(task, "sql", None)
    if isinstance(sql, list | tuple):
        return len(sql)
    if isinstance(sql, str) and getattr(task, "split_statements", False):
        return len([s for s in sql.split(";") if s.strip()])
    return 1


def crash_points(task: Any) -> list[str]:
    """The crash points available for a task (see this module's docstring)."""
    kind = task_kind(task)
    if kind == "project":
        return list(CRASH_POINTS)
    if kind == "sql" and _sql_statements(task) >= 2:
        return list(CRASH_POINTS)
    return ["before", "after_commit"]


def plan(
    writers: Sequence[Any],
    runs: int,
    crashes: str | Sequence[str],
    seed: int | None,
    random_scenarios: int,
) -> tuple[list[Scenario], list[str], int | None]:
    """The scenarios of a check: `runs` complete runs, then the crash scenarios `crashes` asks for
    (each crash point each writer supports, then reruns; or `random_scenarios` seeded ones).

    Returns (scenarios, the crash points skipped and why, the seed used for random ones).
    """
    scenarios = [Scenario(f"run x{runs}", tuple(None for _ in range(runs)))]
    skipped: list[str] = []
    reruns = max(1, runs - 1)
    if crashes == "none":
        return scenarios, skipped, None
    if crashes == "random":
        seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        rng = random.Random(seed)
        for i in range(random_scenarios):
            attempts: list[tuple[str, Crash] | None] = []
            names: list[str] = []
            for _ in range(max(1, runs - 1)):
                if rng.random() < 2 / 3 and writers:
                    task = rng.choice(list(writers))
                    point = rng.choice(crash_points(task))
                    crash = Crash(point, rng.randint(1, 2) if point == "during" else 1)
                    attempts.append((task.task_id, crash))
                    names.append(f"{task.task_id} crashes {crash.label()}")
                else:
                    attempts.append(None)
                    names.append("completes")
            attempts.append(None)
            names.append("completes")
            scenarios.append(Scenario(f"random #{i + 1}: " + ", then ".join(names), tuple(attempts)))
        return scenarios, skipped, seed
    points = (
        list(CRASH_POINTS) if crashes == "all" else [crashes] if isinstance(crashes, str) else list(crashes)
    )
    for point in points:
        if point not in CRASH_POINTS:
            raise HarnessError(
                f"unknown crash point {point!r}: use {', '.join(CRASH_POINTS)}, 'all', 'random' or 'none'"
            )
    for task in writers:
        available = crash_points(task)
        for point in points:
            if point not in available:
                skipped.append(
                    f"{task.task_id}: crash {point} is not available for {type(task).__name__} "
                    "(one atomic SQL statement, or Python code the harness cannot see into)"
                )
                continue
            crash = Crash(point)
            planned: tuple[tuple[str, Crash] | None, ...] = (
                (task.task_id, crash),
                *(None for _ in range(reruns)),
            )
            name = f"{task.task_id}: crash {crash.label()}, then run x{reruns}"
            scenarios.append(Scenario(name, planned, task.task_id))
    return scenarios, skipped, seed

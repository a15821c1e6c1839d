"""Prove a DAG or a task idempotent: run a window N times with crashes, compare with one clean run.

    from airflow_idempotent.testing import check_idempotent

    report = check_idempotent(dag, "2026-05-01", engine=engine)     # a DAG, a task, or a DAG file
    assert report.ok, report.text()

What it does, for one window:

1. snapshots the target tables (their whole content), then runs the DAG (or task) once with no
   crash: the **clean run**; its targets' checksums are the reference;
2. for every **scenario** it restores the snapshot, then makes the attempts of the scenario: N
   complete runs; or a crash at a chosen point of one writing task, then reruns; or random crashes
   (seeded, reproducible);
3. compares every target table with the clean run and, where they differ, says which rows are
   duplicated, missing or extra and which values drift, naming them by key, and which task
   writes that table (the task that broke the property).

Every attempt of every task runs in a **child process** (forked: the operator object needs no
pickling, and the child's rendering of templates never touches the caller's object). A crash is
real: the child sends itself SIGKILL at the chosen point, so nothing after it runs, no ``finally``,
no rollback but the database's own.

The history the attempts record (window writes, the effect ledger, approvals) goes to a
**throw-away store**, an SQLite file in a temporary folder that every history connection of the
subject's tasks points to for the length of the check (`throwaway_history`): the check's runs are
experiments, and the real store (what `airflow-idempotent history` and the UI show) never sees them.

Crash points (``before``, ``during``, ``after_commit``): see `airflow_idempotent.testing.scenarios`;
the forked attempt: `airflow_idempotent.testing.attempt`.

The harness computes its own checksums with plain ``SELECT``s through SQLAlchemy and normalises
values in Python (never the product's checksum), so a bug in the product cannot hide itself
(`airflow_idempotent.testing.tables`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

import airflow_idempotent.testing.scenarios as scenario_plan  # plan() looked up per check: tests swap it
from airflow_idempotent.context import run_context
from airflow_idempotent.testing.attempt import run_attempt
from airflow_idempotent.testing.dagfile import load_dag
from airflow_idempotent.testing.errors import HarnessError
from airflow_idempotent.testing.report import Attempt, HarnessReport, NotIdempotentError, ScenarioResult
from airflow_idempotent.testing.scenarios import Crash, task_kind
from airflow_idempotent.testing.tables import compare_tables, key_columns, read_table, snapshot
from airflow_idempotent.testing.tables import restore as restore_table

if TYPE_CHECKING:
    from airflow_idempotent.window import Window

__all__ = ["Harness", "assert_idempotent", "check_idempotent", "run_id"]


def _targets_of(task: Any, declared: Sequence[str] | None) -> list[str]:
    """A task's target tables: declared; the project operator's table; the tables its SQL writes."""
    if declared is not None:
        return [declared] if isinstance(declared, str) else list(declared)
    kind = task_kind(task)
    if kind == "project":
        return [task.table]
    sql = getattr(task, "sql", None)
    if kind == "sql" and sql:
        from airflow_idempotent.lint import sql_writes  # imported when a check runs (see _window)

        text = ";\n".join(sql) if isinstance(sql, list | tuple) else str(sql)
        if text.strip().lower().endswith(".sql"):  # a template file: read it as Airflow would
            resolved = copy.copy(task)
            with contextlib.suppress(Exception):
                resolved.resolve_template_files()
            sql = getattr(resolved, "sql", None)
            text = ";\n".join(sql) if isinstance(sql, list | tuple) else str(sql or "")
            if text.strip().lower().endswith(".sql"):
                return []
        found: list[str] = []
        for write in sql_writes(text):
            if write.how not in ("create", "drop") and write.table not in found:
                found.append(write.table)
        return found
    return []


@contextlib.contextmanager
def throwaway_history(tasks: Sequence[Any]) -> Iterator[Path]:
    """Point every history connection the tasks use (and the default one) at a new SQLite file for
    the duration; put the environment back after. Forked attempts inherit the environment."""
    from airflow_idempotent.history.store import DEFAULT_CONN_ID, EMBEDDED_FILE

    conn_ids = {DEFAULT_CONN_ID}
    for task in tasks:
        value = getattr(task, "history_conn_id", None)
        if isinstance(value, str) and value:
            conn_ids.add(value)
    with tempfile.TemporaryDirectory(prefix="idem_check_history_") as folder:
        file = Path(folder) / EMBEDDED_FILE
        uri = json.dumps({"conn_type": "sqlite", "host": str(file)})
        saved = {}
        for conn_id in conn_ids:
            name = f"AIRFLOW_CONN_{conn_id.upper()}"
            saved[name] = os.environ.get(name)
            os.environ[name] = uri
        try:
            yield file
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _engine(engine: Engine | str | None, tasks: Sequence[Any]) -> Engine:
    """The harness's own engine (no pool: nothing pooled crosses a fork) on the warehouse."""
    if isinstance(engine, Engine):
        return sa.create_engine(engine.url, poolclass=NullPool)
    if isinstance(engine, str):
        return sa.create_engine(engine, poolclass=NullPool)
    from airflow_idempotent.hooks.warehouse import WarehouseHook

    for task in tasks:
        conn_id = getattr(task, "conn_id", None)
        if isinstance(conn_id, str):
            return sa.create_engine(WarehouseHook(conn_id=conn_id).sqlalchemy_url, poolclass=NullPool)
    raise HarnessError("no engine given and no task has a conn_id: pass engine=<SQLAlchemy engine or URL>")


class _Runner:
    """Runs the subject's tasks in order, each attempt in a forked child, for one window."""

    def __init__(
        self,
        tasks: Sequence[Any],
        engine: Engine,
        user_engine: Engine | None,
        window: Window,
        params: Mapping[str, Any],
        conf: Mapping[str, Any],
        timeout: float,
    ) -> None:
        self.tasks = list(tasks)
        self.engine = engine
        self.user_engine = user_engine
        self.window = window
        self.params, self.conf = params, conf
        self.timeout = timeout

    def attempt(
        self, scenario: str, number: int, crash_at: tuple[str, Crash] | None
    ) -> tuple[list[Attempt], bool]:
        """Run every task once in order; stop at a crash or failure. Returns (attempts, completed)."""
        run = run_id(scenario, self.window)
        xcoms: dict[str, Any] = {}
        out: list[Attempt] = []
        for task in self.tasks:
            crash = crash_at[1] if crash_at is not None and crash_at[0] == task.task_id else None
            context = run_context(task, self.window, run, number, xcoms, self.params, self.conf)
            self.engine.dispose()
            if self.user_engine is not None:
                self.user_engine.dispose()  # no pooled connection (or DuckDB file lock) crosses the fork
            result = run_attempt(task, context, crash, self.timeout)
            if result.status == "ok":
                xcoms[task.task_id] = result.value
                outcome = "completed" if crash is None else "completed (crash point not reached)"
                out.append(Attempt(task.task_id, crash, outcome, "", result.seconds))
                continue
            if result.status == "crashed":
                out.append(Attempt(task.task_id, crash, "crashed", result.error, result.seconds))
            else:
                tail = [line.strip() for line in result.log.strip().splitlines()[-3:]]
                detail = result.error + (" | last log lines: " + " / ".join(tail) if tail else "")
                out.append(Attempt(task.task_id, crash, "failed", detail[:1500], result.seconds))
            return out, False
        return out, True


def check_idempotent(
    subject: Any,
    window: Any,
    *,
    engine: Engine | str | None = None,
    targets: Sequence[str] | Mapping[str, str | Sequence[str]] | None = None,
    keys: Mapping[str, Sequence[str]] | None = None,
    runs: int = 3,
    crashes: str | Sequence[str] = "all",
    seed: int | None = None,
    random_scenarios: int = 3,
    tasks: Sequence[str] | None = None,
    dag_id: str | None = None,
    width: timedelta | None = None,
    params: Mapping[str, Any] | None = None,
    conf: Mapping[str, Any] | None = None,
    reset: Callable[[], None] | None = None,
    restore: bool = True,
    timeout: float = 300.0,
    history: str = "throwaway",
) -> HarnessReport:
    """Run `subject` (a DAG, a task, or a DAG file) for `window` again and again; compare with one clean run.

    :param subject: an Airflow DAG, an operator (task), or the path of a DAG file (with `dag_id`).
    :param window: a day (``"2026-05-01"``, a date), a start datetime (plus `width`, default one day)
        or a ``(start, end)`` pair; handed to the tasks as logical date and data interval.
    :param engine: the warehouse (SQLAlchemy engine or URL) holding the targets; default: the
        Airflow connection of the first task with a ``conn_id``.
    :param targets: the tables to compare. For a task: a list of tables. For a DAG: a mapping
        ``{task_id: table or [tables]}`` for tasks whose targets cannot be found (Python tasks);
        the project's operators declare theirs (``table``), SQL operators' INSERT/MERGE/DELETE/UPDATE
        targets are read from their SQL.
    :param keys: ``{table: [columns]}``: how rows are named in the report (default: primary key,
        unique index, an ``id``/``*_id`` column unique in the clean run, else the whole row).
    :param runs: attempts per scenario (crash scenarios: the crash, then ``runs - 1`` reruns, at least one).
    :param crashes: ``"all"`` (every point each writing task supports), ``"none"``, ``"random"``
        (`random_scenarios` seeded scenarios), or some of ``"before"``, ``"during"``, ``"after_commit"``.
    :param seed: the random scenarios' seed (reported; default: a fresh one).
    :param tasks: in a DAG, the tasks to crash (default: every task with a target).
    :param params: DAG params for the run (over the DAG's defaults); `conf`: the run's conf.
    :param reset: called before the clean run and every scenario instead of restoring the targets'
        snapshot (use it when the tasks also change tables that are not targets).
    :param restore: put the targets back as they were found when done (default True).
    :param history: ``"throwaway"`` (default): the attempts record their history in a temporary
        store that is deleted afterwards; ``"keep"``: in the tasks' own history store, for a test
        that checks what history recorded of each crash and rerun.
    """
    from airflow.sdk import DAG

    if isinstance(subject, str | os.PathLike):
        subject = load_dag(subject, dag_id)
    if isinstance(subject, DAG):
        ordered = list(subject.topological_sort())
        label = subject.dag_id
        declared: Mapping[str, Any] = targets if isinstance(targets, Mapping) else {}
        if targets is not None and not isinstance(targets, Mapping):
            raise HarnessError("for a DAG, give targets as {task_id: [tables]}")
    else:
        if not hasattr(subject, "execute") or not hasattr(subject, "task_id"):
            raise HarnessError(f"{subject!r} is neither a DAG, a task nor a DAG file path")
        ordered = [subject]
        label = subject.task_id
        if isinstance(targets, Mapping):
            declared = targets
        else:
            declared = {subject.task_id: list(targets)} if targets is not None else {}
    if runs < 1:
        raise HarnessError(f"runs must be >= 1 (got {runs})")
    task_targets = {t.task_id: _targets_of(t, declared.get(t.task_id)) for t in ordered}
    task_targets = {k: v for k, v in task_targets.items() if v}
    if not task_targets:
        raise HarnessError(
            f"no target tables found for {label}: declare them, e.g. targets=['my_table'] for a task or "
            "targets={'task_id': ['my_table']} for a DAG"
        )
    writers = [t for t in ordered if t.task_id in task_targets and (tasks is None or t.task_id in tasks)]
    all_tables = list(dict.fromkeys(tbl for names in task_targets.values() for tbl in names))
    table_writers = {tbl: [tid for tid, names in task_targets.items() if tbl in names] for tbl in all_tables}

    span = _window(window, width)
    user_engine = engine if isinstance(engine, Engine) else None
    own_engine = _engine(engine, ordered)
    scenarios, skipped, used_seed = scenario_plan.plan(writers, runs, crashes, seed, random_scenarios)
    runner = _Runner(ordered, own_engine, user_engine, span, params or {}, conf or {}, timeout)
    initial = {tbl: snapshot(own_engine, tbl) for tbl in all_tables}

    def reset_state() -> None:
        if reset is not None:
            reset()
        else:
            for snap in initial.values():
                restore_table(own_engine, snap)

    if history not in ("throwaway", "keep"):
        raise HarnessError(f"history={history!r}: give 'throwaway' (the default) or 'keep'")
    history_scope = contextlib.ExitStack()
    try:
        if history == "throwaway":
            history_scope.enter_context(throwaway_history(ordered))
        reset_state()
        attempts, completed = runner.attempt("clean", 1, None)
        if not completed:
            failed = attempts[-1]
            raise HarnessError(
                f"the clean run of {label} for window {span.start.date()} failed in {failed.task_id}: "
                f"{failed.detail}\nfix the task (or the test's setup) first: without one clean run there is "
                "nothing to compare with"
            )
        clean = {tbl: read_table(own_engine, tbl) for tbl in all_tables}
        key_of = {
            tbl: key_columns(
                own_engine, tbl, (keys or {}).get(tbl) or _declared_key(ordered, tbl), clean[tbl]
            )
            for tbl in all_tables
        }
        results: list[ScenarioResult] = []
        for scenario in scenarios:
            reset_state()
            done: list[Attempt] = []
            for number, crash_at in enumerate(scenario.attempts, start=1):
                made, _ = runner.attempt(scenario.name, number, crash_at)
                done.extend(made)
            diffs = []
            for tbl in all_tables:
                diff = compare_tables(clean[tbl], read_table(own_engine, tbl), key_of[tbl])
                diff.writers = table_writers[tbl]
                diffs.append(diff)
            note = None
            failures = [a for a in done if a.outcome == "failed"]
            if failures:
                note = f"{len(failures)} attempt(s) failed (not a planned crash): {failures[0].describe()}"
            results.append(ScenarioResult(scenario.name, scenario.crash_task, done, diffs, note))
    finally:
        history_scope.close()
        if restore:
            with contextlib.suppress(Exception):
                for snap in initial.values():
                    restore_table(own_engine, snap)
        own_engine.dispose()
    return HarnessReport(
        subject=label,
        window=span.label(),
        runs=runs,
        seed=used_seed,
        operators={t.task_id: type(t).__name__ for t in ordered},
        targets=task_targets,
        clean=clean,
        scenarios=results,
        skipped=skipped,
    )


def _declared_key(tasks: Sequence[Any], table: str) -> list[str] | None:
    """The key_columns a MergeOperator writing `table` declares."""
    for task in tasks:
        if getattr(task, "table", None) == table and getattr(task, "key_columns", None):
            return list(task.key_columns)
    return None


def run_id(scenario: str, window: Window) -> str:
    """The run_id the attempts of a scenario (or of the clean run, "clean") see: what history records."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", scenario).strip("_")[:60]
    return f"idempotency__{slug}__{window.start.isoformat()}"


def _window(value: Any, width: timedelta | None) -> Window:
    """The window a person gives the check (window.py's rule), with the harness's error type."""
    # Imported when a check runs: airflow_idempotent.errors imports Airflow, and importing this
    # package must not read Airflow's configuration (a project's conftest may set AIRFLOW_HOME first).
    from airflow_idempotent.errors import WindowError
    from airflow_idempotent.window import window_of

    try:
        return window_of(value, width or timedelta(days=1))
    except WindowError as err:
        raise HarnessError(str(err)) from err


def assert_idempotent(subject: Any, window: Any, **kwargs: Any) -> HarnessReport:
    """check_idempotent, raising NotIdempotentError (an AssertionError with the report) on a failure."""
    report = check_idempotent(subject, window, **kwargs)
    if not report.ok:
        raise NotIdempotentError(report)
    return report


@dataclass
class Harness:
    """Defaults for check_idempotent (the pytest fixture `idempotency` is one of these)."""

    runs: int = 3
    crashes: str | Sequence[str] = "all"
    seed: int | None = None
    random_scenarios: int = 3
    timeout: float = 300.0
    reports: list[HarnessReport] = field(default_factory=list)

    def _kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        for name in ("runs", "crashes", "seed", "random_scenarios", "timeout"):
            kwargs.setdefault(name, getattr(self, name))
        return kwargs

    def check(self, subject: Any, window: Any, **kwargs: Any) -> HarnessReport:
        report = check_idempotent(subject, window, **self._kwargs(kwargs))
        self.reports.append(report)
        return report

    def assert_idempotent(self, subject: Any, window: Any, **kwargs: Any) -> HarnessReport:
        report = self.check(subject, window, **kwargs)
        if not report.ok:
            raise NotIdempotentError(report)
        return report

"""The DAG linter: find the shapes that make a rerun unsafe, by reading DAG files (never running them).

`lint_paths` parses each DAG file with Python's :mod:`ast` (the file is never imported or
executed), finds its DAGs and tasks (`collect`), follows the SQL they run (``sql=`` strings, module
constants, imported constants, ``.sql`` files next to the DAG or on its ``template_searchpath``,
SQL strings that task code passes to ``execute``/``run``), runs the checks (`checks`) and answers
the three review questions for every task (`answers`). Rules: `rules.RULES`.

A finding is acknowledged with a comment ``# idempotent: ack IDEM002 reason`` (``-- idempotent:
ack ...`` in SQL) on its line or the line above (for a task's findings, also on the line that
starts the task); acknowledged findings are listed, not failed.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from pathlib import Path

from airflow_idempotent.lint.answers import backfill_answer, runs_twice, window_answer
from airflow_idempotent.lint.checks import check_catchup, check_shared_targets, check_task
from airflow_idempotent.lint.codechecks import check_module_clock
from airflow_idempotent.lint.collect import Collector, DagDef, TaskDef
from airflow_idempotent.lint.facts import TaskFacts
from airflow_idempotent.lint.findings import Recorder
from airflow_idempotent.lint.report import LintReport, RuleFinding, TaskReport
from airflow_idempotent.lint.rules import rule_id
from airflow_idempotent.lint.scope import Scope, Workspace
from airflow_idempotent.lint.source import dag_files

__all__ = ["Linter", "lint_paths"]


class Linter:
    """One lint run: the files read, the DAGs and tasks found, and what the checks recorded."""

    def __init__(self, dialect: str | None = None) -> None:
        self.dialect = dialect
        self.workspace = Workspace()
        self.recorder = Recorder()
        self.tasks: list[tuple[TaskDef, TaskFacts]] = []
        self.dags: list[DagDef] = []
        self.files: list[str] = []

    def lint_file(self, path: Path) -> None:
        """Check one DAG file: IDEM000 if it is not Python, else its DAGs, tasks and module code."""
        src = self.workspace.source(path)
        if src is None:
            return
        self.files.append(src.display)
        try:
            tree = ast.parse(src.text, filename=str(path))
        except SyntaxError as err:
            self.recorder.add("IDEM000", src.display, err.lineno or 1, f"not valid Python: {err.msg}")
            return
        scope = Scope(self.workspace, src, tree)
        self.workspace.scopes[src.path] = scope
        collector = Collector(scope)
        collector.collect()
        self.dags.extend(collector.dags)
        for dag in collector.dags:
            check_catchup(dag, self.recorder)
            for task in dag.tasks:
                self.tasks.append((task, check_task(task, self.recorder, self.workspace, self.dialect)))
        for task in collector.loose:
            self.tasks.append((task, check_task(task, self.recorder, self.workspace, self.dialect)))
        check_module_clock(self.recorder, scope, collector)

    def cross_task(self) -> None:
        """The checks across every task of every file linted (IDEM007)."""
        check_shared_targets(self.tasks, self.recorder)

    def task_reports(self) -> list[TaskReport]:
        """Every task with the rules it broke and its answers to the three review questions."""
        rules_by_task: dict[tuple[str | None, str], list[str]] = {}
        for f in self.recorder.findings:
            if f.task_id is not None:
                rules_by_task.setdefault((f.dag_id, f.task_id), []).append(f.rule)
        reports = []
        for task, facts in self.tasks:
            key = (task.dag_id, task.task_id)
            notes = self.recorder.notes.get(id(task), []) + facts.notes
            reports.append(
                TaskReport(
                    dag_id=task.dag_id,
                    task_id=task.task_id,
                    file=task.scope.source.display,
                    line=task.line,
                    operator=task.operator,
                    targets=sorted({w.table for w in facts.writes}),
                    runs_twice=runs_twice(facts),
                    window=window_answer(facts),
                    backfill=backfill_answer(task, facts),
                    rules=sorted(set(rules_by_task.get(key, []))),
                    notes=notes,
                )
            )
        return reports

    def acknowledge(self, findings: Iterable[RuleFinding]) -> None:
        """Mark the findings an ``idempotent: ack`` comment covers (their line, the line above, or
        their anchors' lines)."""
        by_display = {src.display: src for src in self.workspace.sources.values()}
        for f in findings:
            places = [(f.file, f.line), (f.file, f.line - 1)]
            for file, line in f.anchors:
                places.extend([(file, line), (file, line - 1)])
            for file, line in places:
                src = by_display.get(file)
                if src is None:
                    continue
                acks = src.acks.get(line, {})
                if f.rule in acks:
                    f.acknowledged = True
                    f.reason = acks[f.rule]
                    break


def lint_paths(
    paths: Iterable[str | os.PathLike[str]], ignore: Iterable[str] = (), dialect: str | None = None
) -> LintReport:
    """Lint DAG files (directories are searched for them) and return every finding and task."""
    ignored = tuple(sorted({rid for token in ignore if (rid := rule_id(token)) is not None}))
    linter = Linter(dialect)
    for path in dag_files(paths):
        linter.lint_file(path)
    linter.cross_task()
    unique: dict[tuple[str, str, int, str], RuleFinding] = {}
    for f in linter.recorder.findings:
        if f.rule not in ignored:
            unique.setdefault((f.rule, f.file, f.line, f.message), f)
    findings = sorted(unique.values(), key=lambda f: (f.file, f.line, f.rule))
    linter.acknowledge(findings)
    return LintReport(files=linter.files, findings=findings, tasks=linter.task_reports(), ignored=ignored)

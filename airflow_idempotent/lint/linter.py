"""The DAG linter: find the shapes that make a rerun unsafe, by reading DAG files (never running them).

`lint_paths` parses each DAG file with Python's :mod:`ast` and the newest grammar available
(`pysyntax`; the file is never imported or executed), finds its DAGs and tasks (`collect`), follows
the SQL they run (``sql=`` strings, constants, dicts and lists of them, imported constants, ``.sql``
files next to the DAG, on its ``template_searchpath`` or on deployed Astro paths, SQL that task code
passes to ``execute``/``run``, BigQuery job configurations), runs the checks (`checks`) and answers
the three review questions for every task (`answers`). Rules: `rules.RULES`.

Each path argument belongs to a repository (the git work tree holding it, else the argument
itself): tables are paired (IDEM007) only within one repository. One file's failure is reported
as a finding of that file (IDEM000) and the run goes on.

A finding is acknowledged with a comment ``# idempotent: ack IDEM002 reason`` (``-- idempotent:
ack ...`` in SQL) on its line or the line above (for a task's findings, also on the line that
starts the task); acknowledged findings are listed, not failed. The report lists each code site once
with the tasks reaching it (`sites.by_site`), grouped after acknowledgements.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

from airflow_idempotent.lint.answers import backfill_answer, runs_twice, window_answer
from airflow_idempotent.lint.catchups import PendingCatchup, check_catchup, decide_catchups
from airflow_idempotent.lint.chatreports import check_chat_report
from airflow_idempotent.lint.checks import check_task, task_findings
from airflow_idempotent.lint.codechecks import check_dag_code_clock
from airflow_idempotent.lint.collect import Collector
from airflow_idempotent.lint.definitions import DagDef
from airflow_idempotent.lint.deployment import (
    CatchupDefault,
    DataIntervals,
    repository_catchup,
    repository_data_intervals,
)
from airflow_idempotent.lint.docstamps import check_document_stamps
from airflow_idempotent.lint.findings import Recorder, TaskCheck, without_restated
from airflow_idempotent.lint.pyreloads import check_python_reload
from airflow_idempotent.lint.pysyntax import parse_module
from airflow_idempotent.lint.repomarks import repository_marks
from airflow_idempotent.lint.report import LintReport, Notice, RuleFinding, TaskReport
from airflow_idempotent.lint.returnedwindows import check_returned_windows
from airflow_idempotent.lint.rolling import check_rolling_windows
from airflow_idempotent.lint.rules import rule_id
from airflow_idempotent.lint.scope import Scope, Workspace
from airflow_idempotent.lint.severities import check_severities
from airflow_idempotent.lint.shared import check_shared_targets, dag_clears
from airflow_idempotent.lint.sites import by_site
from airflow_idempotent.lint.source import dag_files, shown
from airflow_idempotent.lint.sqlfacts import TableKeys
from airflow_idempotent.lint.stamps import check_stamps, exported_columns, exported_tables, marks_of
from airflow_idempotent.lint.startdates import check_start_date_helpers
from airflow_idempotent.lint.watermarks import check_watermarks
from airflow_idempotent.lint.widths import check_window_width

__all__ = ["Linter", "jinja_tag", "lint_paths", "repository_of"]

#: A Jinja tag where the parser stops: ``{% raw %}``, ``{{ dependencies }}``, ``{# note #}``.
_JINJA_TAG = re.compile(r"\{%-?\s*\w.*?-?%\}|\{\{.*?\}\}|\{#.*?#\}")
_TEMPLATE = (
    "a Jinja template with a .py suffix ({tag} at line {line} is Jinja, not Python): a template that "
    "renders DAG files, not a DAG file, so it was not checked; lint the files it renders"
)


def jinja_tag(text: str, line: int) -> str | None:
    """The Jinja tag on the line where a file stops parsing as Python, if there is one: then the file
    is a template of a DAG file (it renders one), not a DAG file with a syntax error.

    Principle (IDEM000): a file that is not Python because Jinja markup stands where the parser
    fails is information, never a finding: nothing in it is a DAG to fix, and what it renders is
    linted as its own files. Markup elsewhere (a ``'{{ ds }}'`` inside a string) decides nothing:
    only the failing line counts, so a real syntax error beside templated SQL stays IDEM000."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    found = _JINJA_TAG.search(lines[line - 1])
    return found.group(0) if found is not None else None


def repository_of(path: Path, argument: Path) -> Path:
    """The repository a linted file belongs to: the git work tree holding it, else the path argument
    it was found through (so several arguments outside git are several repositories)."""
    for folder in [path.parent, *path.parent.parents]:
        if (folder / ".git").exists():
            return folder
    return argument


class Linter:
    """One lint run: the files read, the DAGs and tasks found, and what the checks recorded."""

    def __init__(
        self, dialect: str | None = None, catchup_default: bool | None = None, follow_callables: bool = False
    ) -> None:
        self.dialect = dialect
        #: --follow-imported-callables: read a python_callable imported from the repository (`callables`)
        self.follow_callables = follow_callables
        #: --catchup-default; else each repository's own setting (`deployment.repository_catchup`)
        self.catchup_default = catchup_default
        self._catchup: dict[Path, CatchupDefault | None] = {}
        self._intervals: dict[Path, DataIntervals] = {}
        self.workspace = Workspace()
        self.recorder = Recorder()
        self.recorder.trees = self._tree_of
        self.checks: list[tuple[TaskCheck, Path]] = []
        self.dags: list[DagDef] = []
        #: catchup backlogs, decided once every task is checked (`catchups.decide_catchups`)
        self.catchups: list[PendingCatchup] = []
        self.files: list[str] = []
        self.notices: list[Notice] = []
        self._linted: set[Path] = set()

    def lint_file(self, path: Path, repository: Path | None = None) -> None:
        """Check one DAG file: IDEM000 if it is not Python, else its DAGs, tasks and module code."""
        src = self.workspace.source(path)
        if src is None or src.path in self._linted:
            return
        self._linted.add(src.path)
        self.files.append(src.display)
        checks, dags, catchups = len(self.checks), len(self.dags), len(self.catchups)
        try:
            try:
                parsed = parse_module(src.text, str(path))
            except SyntaxError as err:
                line = err.lineno or 1
                if (tag := jinja_tag(src.text, line)) is not None:
                    self.recorder.info("IDEM000", src.display, line, _TEMPLATE.format(tag=tag, line=line))
                else:
                    self.recorder.add("IDEM000", src.display, line, f"not valid Python: {err.msg}")
                return
            except ValueError as err:  # null bytes
                self.recorder.add("IDEM000", src.display, 1, f"not valid Python: {err}")
                return
            if parsed.notice is not None:
                self.notices.append(Notice(src.display, 1, parsed.notice))
            scope = Scope(self.workspace, src, parsed.tree)
            self.workspace.scopes[src.path] = scope
            collector = Collector(scope, self.follow_callables)
            collector.collect()
            self.dags.extend(collector.dags)
            repo = repository or path.parent
            default = self._catchup_default(repo)
            pending = [p for d in collector.dags if (p := check_catchup(d, self.recorder, default))]
            for task in [*(t for d in collector.dags for t in d.tasks), *collector.loose]:
                self.checks.append((check_task(task, self.recorder, self.workspace, self.dialect), repo))
            for item in pending:
                item.checks = [c for c, _ in self.checks[checks:] if c.task.dag is item.dag]
            self.catchups.extend(pending)
            if repo not in self._intervals:
                self._intervals[repo] = repository_data_intervals(repo)
            for dag in collector.dags:
                check_window_width(dag, self.recorder, self._intervals[repo])
            if collector.dags or collector.loose:  # a file with no DAG or task has no DAG code
                check_dag_code_clock(self.recorder, scope, collector)
            check_start_date_helpers(self.recorder, collector)
        except Exception as exc:  # one file's failure is that file's finding; the run goes on
            del self.checks[checks:], self.dags[dags:], self.catchups[catchups:]
            self._failed(src.display, exc)

    def _tree_of(self, display: str) -> ast.Module | None:
        """The syntax tree of a file read in this run, by the name reports show (IDEM003's severity
        follows the clock's value in it: `findings.Recorder.clock_read`)."""
        src = next((s for s in self.workspace.sources.values() if s.display == display), None)
        scope = self.workspace.scope(src.path) if src is not None else None
        return scope.tree if scope is not None else None

    def _catchup_default(self, repo: Path) -> CatchupDefault | None:
        if self.catchup_default is not None:
            return CatchupDefault(self.catchup_default, "--catchup-default")
        if repo not in self._catchup:
            self._catchup[repo] = repository_catchup(repo)
        return self._catchup[repo]

    def _failed(self, file: str, exc: BaseException) -> None:
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
        self.recorder.add(
            "IDEM000",
            file,
            1,
            f"the linter failed on this file ({type(exc).__name__}: {exc}{where}), so it was not "
            "checked: please report it with the file",
            fix="nothing in the file needs fixing for this: the linter does; lint the rest of the repository "
            "meanwhile (the other files were checked)",
        )

    def finish(self) -> None:
        """The checks that need every task of a repository: declared keys, watermarks, IDEM007."""
        by_repo: dict[Path, list[TaskCheck]] = {}
        for check, repo in self.checks:
            by_repo.setdefault(repo, []).append(check)
        for repo, checks in by_repo.items():
            declared: dict[str, list[TableKeys]] = {}
            for check in checks:
                for keys in check.facts.declared:
                    declared.setdefault(keys.table, []).append(keys)
            pairs = [(c.task, c.facts) for c in checks]
            clears = dag_clears(pairs)
            marks = marks_of(checks)
            elsewhere = frozenset(repository_marks(repo, exported_columns(checks)))
            loaded = exported_tables(checks)
            for check in checks:
                self._guarded(check.file, functools.partial(task_findings, check, declared, clears))
                self._guarded(
                    check.file,
                    functools.partial(check_stamps, check, marks, elsewhere, loaded.get(id(check), ())),
                )
                self._guarded(check.file, functools.partial(check_document_stamps, check, marks))
                self._guarded(check.file, functools.partial(check_chat_report, check, self.recorder))
                self._guarded(check.file, functools.partial(check_python_reload, check, self.recorder))
            self._guarded(checks[0].file, functools.partial(check_watermarks, checks))
            self._guarded(
                checks[0].file, functools.partial(check_shared_targets, pairs, self.recorder, clears)
            )
        every = [check for check, _repo in self.checks]
        if every:
            self._guarded(
                every[0].file, functools.partial(check_returned_windows, every, self.recorder, self.workspace)
            )
            self._guarded(
                every[0].file, functools.partial(check_rolling_windows, every, self.recorder, self.workspace)
            )
        for item in self.catchups:
            self._guarded(item.dag.file, functools.partial(decide_catchups, [item], self.recorder))
        if every:  # round 36k: severity by shape, once catch-up has counted the clock reads
            self._guarded(every[0].file, functools.partial(check_severities, every, self.recorder))

    def _guarded(self, file: str, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as exc:
            self._failed(file, exc)

    def task_reports(self) -> list[TaskReport]:
        """Every task with the rules it broke and its answers to the three review questions."""
        rules_by_task: dict[tuple[str | None, str], list[str]] = {}
        for f in self.recorder.findings:
            if f.task_id is not None:
                rules_by_task.setdefault((f.dag_id, f.task_id), []).append(f.rule)
        reports = []
        for check, _repo in self.checks:
            task, facts = check.task, check.facts
            key = (task.dag_id, task.task_id)
            notes = self.recorder.notes.get(id(task), []) + facts.notes
            reports.append(
                TaskReport(
                    dag_id=task.dag_id,
                    task_id=task.task_id,
                    file=task.scope.source.display,
                    line=task.line,
                    operator=task.operator,
                    targets=sorted({shown(w.table) for w in facts.writes}),
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
    paths: Iterable[str | os.PathLike[str]],
    ignore: Iterable[str] = (),
    dialect: str | None = None,
    catchup_default: bool | None = None,
    follow_callables: bool = False,
) -> LintReport:
    """Lint DAG files (directories are searched for them) and return every finding and task.
    `catchup_default`: the deployment's catchup for DAGs without ``catchup=`` (None: each
    repository's airflow.cfg / environment files, else not judged); `follow_callables`: read a
    ``python_callable`` imported from another module of the repository (off by default)."""
    ignored = tuple(sorted({rid for token in ignore if (rid := rule_id(token)) is not None}))
    linter = Linter(dialect, catchup_default, follow_callables)
    found = [(Path(raw).resolve(), dag_files([raw])) for raw in paths]  # every path exists, or nothing runs
    linter.workspace.roots = [a if a.is_dir() else a.parent for a, _ in found]
    for argument, files in found:
        for path in files:
            linter.lint_file(path, repository_of(path.resolve(), argument))
    linter.finish()
    unique: dict[tuple[str, str, int, str, str | None, str | None], RuleFinding] = {}
    for f in linter.recorder.findings:
        if f.rule not in ignored:
            unique.setdefault((f.rule, f.file, f.line, f.message, f.dag_id, f.task_id), f)
    findings = sorted(without_restated(list(unique.values())), key=lambda f: (f.file, f.line, f.rule))
    linter.acknowledge(findings)  # per task, before sites are grouped: an ack covers its own task
    information = sorted(
        (f for f in linter.recorder.information if f.rule not in ignored),
        key=lambda f: (f.file, f.line, f.rule),
    )
    return LintReport(
        files=linter.files,
        findings=by_site(findings),
        tasks=linter.task_reports(),
        ignored=ignored,
        notices=linter.notices,
        information=by_site(information),
    )

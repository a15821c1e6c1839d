"""What one lint run found, and its two output formats (text for people, JSON for tools).

A `RuleFinding` is one reason a rerun is unsafe (rule, file:line, message, fix); a `TaskReport` is
a task as the linter understood it, with its answers to the three review questions.

A report lists each code site once (round 36g, `sites.by_site`): a helper's INSERT that 86 DAGs call
is one finding whose ``tasks`` name the 86 (DAG, task) pairs, since a reviewer acts on the line once;
`TaskReport.rules` still names the rule for every task that reaches it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_idempotent.lint.rules import RULES

__all__ = ["SHOWN_TASKS", "LintReport", "Notice", "RuleFinding", "TaskReport", "task_label"]


@dataclass
class RuleFinding:
    """One reason a rerun is unsafe: which rule, where, why, and the fix."""

    rule: str
    file: str
    line: int
    message: str
    fix: str
    dag_id: str | None = None
    task_id: str | None = None
    acknowledged: bool = False
    reason: str | None = None
    #: extra (file, line) places where an acknowledgement counts (the task's first line)
    anchors: tuple[tuple[str, int], ...] = ()
    #: every (dag id, task id) whose code reaches this site, in the order found, the first being
    #: (dag_id, task_id); empty for a finding of one task not yet grouped (`sites.by_site`)
    tasks: tuple[tuple[str | None, str | None], ...] = ()
    #: the findings of each task and cause grouped into this site, in the order found, each with its
    #: own message (a task writing two tables through one helper line has two); empty when not grouped
    members: tuple[RuleFinding, ...] = ()

    @property
    def name(self) -> str:
        return RULES[self.rule].name

    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def reached_by(self) -> tuple[tuple[str | None, str | None], ...]:
        """Every (dag id, task id) reaching this site: `tasks`, or this finding's own owner."""
        return self.tasks or ((self.dag_id, self.task_id),)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "name": self.name,
            "file": self.file,
            "line": self.line,
            "dag_id": self.dag_id,
            "task_id": self.task_id,
            "tasks": [{"dag_id": dag, "task_id": task} for dag, task in self.reached_by()],
            "message": self.message,
            "fix": self.fix,
        }
        if self.acknowledged:
            out["reason"] = self.reason or ""
        return out


@dataclass
class TaskReport:
    """A task as the linter understood it, and its answers to the three review questions."""

    dag_id: str | None
    task_id: str
    file: str
    line: int
    operator: str
    targets: list[str]
    runs_twice: str
    window: str
    backfill: str
    rules: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.dag_id}.{self.task_id}" if self.dag_id else self.task_id

    def as_dict(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "task_id": self.task_id,
            "file": self.file,
            "line": self.line,
            "operator": self.operator,
            "targets": self.targets,
            "rules": self.rules,
            "answers": {
                "if_this_runs_twice": self.runs_twice,
                "what_decides_its_window": self.window,
                "how_to_backfill_90_days": self.backfill,
            },
            "notes": self.notes,
        }


@dataclass(frozen=True)
class Notice:
    """Something about a file the reader must know that is no finding: e.g. that it needs a newer
    Python than the linter ran under (its findings stand; check it under that Python)."""

    file: str
    line: int
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message}


@dataclass
class LintReport:
    """Everything one lint run found."""

    files: list[str]
    findings: list[RuleFinding]
    tasks: list[TaskReport]
    ignored: tuple[str, ...] = ()
    notices: list[Notice] = field(default_factory=list)
    #: information: a rule's condition holds but the rerun is safe here (e.g. disjoint writers of one
    #: table, an audit column set to now()); listed, never failed, not in SARIF's results
    information: list[RuleFinding] = field(default_factory=list)

    @property
    def failing(self) -> list[RuleFinding]:
        return [f for f in self.findings if not f.acknowledged]

    @property
    def acknowledged(self) -> list[RuleFinding]:
        return [f for f in self.findings if f.acknowledged]

    @property
    def exit_code(self) -> int:
        return 1 if self.failing else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "summary": {
                "files": len(self.files),
                "tasks": len(self.tasks),
                "findings": len(self.failing),
                "acknowledged": len(self.acknowledged),
                "task_findings": sum(len(f.reached_by()) for f in self.failing),
                "by_rule": _count_by_rule(self.failing),
                "ignored_rules": list(self.ignored),
            },
            "findings": [f.as_dict() for f in self.failing],
            "acknowledged": [f.as_dict() for f in self.acknowledged],
            "notices": [n.as_dict() for n in self.notices],
            "information": [f.as_dict() for f in self.information],
            "tasks": [t.as_dict() for t in self.tasks],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def to_text(self) -> str:
        out: list[str] = []
        for f in self.failing:
            out.append(f"{f.where()}: {f.rule} {f.name}{_task_suffix(f)}: {f.message}")
            out.append(f"    fix: {f.fix}")
        if self.acknowledged:
            if out:
                out.append("")
            out.append("Acknowledged:")
            for f in self.acknowledged:
                reason = f.reason or "(no reason given)"
                out.append(f"  {f.where()}: {f.rule} {f.name}{_task_suffix(f)}: {f.message}")
                out.append(f"    acknowledged: {reason}")
        if self.notices:
            if out:
                out.append("")
            out.extend(f"{n.file}:{n.line}: note: {n.message}" for n in self.notices)
        if self.information:
            if out:
                out.append("")
            out.append("Information (safe to rerun here, not failed):")
            out.extend(f"  {f.where()}: {f.rule}{_task_suffix(f)}: {f.message}" for f in self.information)
        if self.tasks:
            if out:
                out.append("")
            out.append("Tasks:")
            for t in self.tasks:
                out.append(f"  {t.label}  ({t.file}:{t.line}, {t.operator})")
                out.append(f"    If this runs twice?                      {t.runs_twice}")
                out.append(f"    What decides its window?                 {t.window}")
                out.append(f"    How would we backfill the last 90 days?  {t.backfill}")
                out.extend(f"    note: {note}" for note in t.notes)
        if out:
            out.append("")
        failing, acked = len(self.failing), len(self.acknowledged)
        counts = ", ".join(f"{rule} x{n}" for rule, n in _count_by_rule(self.failing).items())
        reached = sum(len(f.reached_by()) for f in self.failing)
        per_task = f" reached by {reached} task(s)" if reached != failing else ""
        out.append(
            f"{failing} finding(s){f' ({counts})' if counts else ''}{per_task}, {acked} acknowledged; "
            f"{len(self.tasks)} task(s) in {len(self.files)} file(s)."
        )
        return "\n".join(out) + "\n"


#: how many more tasks of a site the text output names after the first (then "...")
SHOWN_TASKS = 5


def task_label(dag_id: str | None, task_id: str | None) -> str:
    """``dag.task``, the task alone, the DAG alone (a DAG-level finding), or "" (a file's)."""
    if task_id:
        return f"{dag_id}.{task_id}" if dag_id else task_id
    return dag_id or ""


def _task_suffix(f: RuleFinding) -> str:
    """`` [dag_a.load]``, or for a site several tasks reach ``[dag_a.load +85 more tasks: dag_b.load,
    ..., ...]`` (at most `SHOWN_TASKS` more named)."""
    labels = [task_label(dag, task) for dag, task in f.reached_by()]
    if not any(labels):
        return ""
    more = labels[1 : 1 + SHOWN_TASKS] + (["..."] if len(labels) > 1 + SHOWN_TASKS else [])
    count = len(labels) - 1
    tail = f" +{count} more task{'s' if count > 1 else ''}: {', '.join(more)}" if more else ""
    return f" [{labels[0]}{tail}]"


def _count_by_rule(findings: Iterable[RuleFinding]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in sorted(findings, key=lambda f: f.rule):
        counts[f.rule] = counts.get(f.rule, 0) + 1
    return counts

"""One finding per code site (round 36g, issue 35): the findings of one rule at one file and line are
one finding, listing every (DAG, task) that reaches it.

Why: the checks judge each task (`findings.Recorder.add` keeps one finding per task and cause), so a
helper's INSERT that 86 DAGs call, or a DAG factory's line that every DAG it makes runs, was reported
86 times; a reviewer acts on the line once. The checks stay per task (`TaskReport.rules` names the
rule for every task); only the report groups.

Grouping comes after acknowledgements (an ``idempotent: ack`` at one task's anchor covers that task
only): acknowledged and failing findings of one site are separate findings, and acknowledgements with
different reasons too. The site is (rule, file, line): the first finding's message, fix and owner are
kept; messages of later tasks that differ (IDEM007 names the other writers of each task, a factory's
line names each DAG's table) are not shown: their tasks are, and `RuleFinding.members` keeps each
task's finding with its message for the Python API.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from airflow_idempotent.lint.report import RuleFinding

__all__ = ["by_site"]


def by_site(findings: Iterable[RuleFinding]) -> list[RuleFinding]:
    """`findings` (one per task and cause, acknowledgements applied) as one finding per rule, file,
    line and acknowledgement, in the order of each site's first finding; its `tasks` list every
    distinct (dag id, task id) in the order found, the first being its dag_id and task_id, and its
    `members` the findings grouped (two for a task reaching the site for two causes, as two tables
    written through one helper line: the unit `tools/lint_public.py --per-task` scores)."""
    sites: dict[tuple[object, ...], list[RuleFinding]] = {}
    for f in findings:
        key = (f.rule, f.file, f.line, f.acknowledged, f.reason if f.acknowledged else None)
        sites.setdefault(key, []).append(f)
    return [
        replace(
            found[0],
            tasks=tuple(dict.fromkeys(owner for f in found for owner in f.reached_by())),
            members=tuple(m for f in found for m in (f.members or (f,))),
        )
        for found in sites.values()
    ]

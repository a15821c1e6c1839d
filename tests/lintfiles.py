"""Write a small project of DAG files and helper modules into a folder and lint it as one run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from airflow_idempotent.lint import LintReport, RuleFinding, lint_paths


def lint_files(root: Path, files: dict[str, str]) -> LintReport:
    """Write `files` (relative path -> text, folders made as needed) under `root`; lint `root`."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return lint_paths([root])


def per_task(findings: Iterable[RuleFinding]) -> list[RuleFinding]:
    """Each code site's finding once per (DAG, task) its `tasks` list (round 36g reports a site once):
    for tests of which tasks a check reaches, the unit they were written in."""
    return [
        replace(f, dag_id=dag_id, task_id=task_id, tasks=())
        for f in findings
        for dag_id, task_id in f.reached_by()
    ]


def finding_rows(report: LintReport) -> list[tuple[str, str, int, str | None]]:
    """The report's findings as sorted (rule, file name, line, task id) rows, one per task reaching a
    site (`per_task`)."""
    return sorted((f.rule, Path(f.file).name, f.line, f.task_id) for f in per_task(report.findings))


#: the reasons round 36c (issue 35, lint54) gives when IDEM001, IDEM006 or IDEM007 lists what it found
#: as information only because it is outside the rule's defect shapes (`clockroles`, `sendtargets`,
#: `shared._overlap`; `tests/test_lint_public54.py` tests that severity)
ROUND_36C = (
    "nothing shows it creates or moves",
    "nothing shows their writes overlap",
    "only as a test of current state",
    "its value is a stamp of when",
    "It would be a defect if the stamp were read as a mark",
    # round 36e (lint60): IDEM003's randomness used whole (`randomuses`, tests/test_lint_public60.py)
    "never built into a name",
)


def seen(report: LintReport) -> list[RuleFinding]:
    """What the rules saw, whatever its severity since round 36c: the findings, and the information
    listed only for being outside a rule's defect shapes. Earlier rounds' tests of what a check
    detects (a send, a clock read, a second writer) assert on this; their severity is round 36c's."""
    return [*report.findings, *(f for f in report.information if any(m in f.message for m in ROUND_36C))]


def explained(report: LintReport) -> list[RuleFinding]:
    """The information less what round 36c lists only for being outside a rule's defect shapes: what
    a check explains as safe for its own reason (a chat notice, an audit column, a staged build)."""
    return [f for f in report.information if not any(m in f.message for m in ROUND_36C)]


def seen_rows(report: LintReport) -> list[tuple[str, str, int, str | None]]:
    """`finding_rows` of what the rules saw (`seen`), one per task reaching a site."""
    return sorted((f.rule, Path(f.file).name, f.line, f.task_id) for f in per_task(seen(report)))

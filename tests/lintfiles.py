"""Write a small project of DAG files and helper modules into a folder and lint it as one run."""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths


def lint_files(root: Path, files: dict[str, str]) -> LintReport:
    """Write `files` (relative path -> text, folders made as needed) under `root`; lint `root`."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return lint_paths([root])


def finding_rows(report: LintReport) -> list[tuple[str, str, int, str | None]]:
    """The report's findings as sorted (rule, file name, line, task id) rows."""
    return sorted((f.rule, Path(f.file).name, f.line, f.task_id) for f in report.findings)

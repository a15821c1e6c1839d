"""The lint report as SARIF 2.1.0, the format GitHub code scanning (and most review tools) read.

``airflow-idempotent lint dags --format sarif > lint.sarif`` and upload it with
``github/codeql-action/upload-sarif``: every finding becomes an alert on its line, with the rule's
summary and fix as help (one alert per code site: the tasks that reach it are its logical locations
and ``properties.tasks``); an acknowledged finding is a result suppressed in source (with its
reason), so the alert shows as dismissed rather than vanishing; notices (a file that needs a newer
Python) become tool notifications.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow_idempotent.lint.report import LintReport, RuleFinding, task_label
from airflow_idempotent.lint.rules import RULES

__all__ = ["SARIF_SCHEMA", "SARIF_VERSION", "to_sarif", "to_sarif_json"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_TOOL = "airflow-idempotent lint"
_SRCROOT = "%SRCROOT%"


def _version() -> str:
    from airflow_idempotent import __version__  # the package root: no import cycle with lint

    return str(__version__)


def _location(file: str, line: int) -> dict[str, Any]:
    """A physical location: relative to the directory the linter ran in (``%SRCROOT%``), as GitHub
    expects, or an absolute file URI for a file outside it."""
    path = Path(file)
    if path.is_absolute() or file.startswith(".."):
        artifact: dict[str, Any] = {"uri": path.resolve().as_uri()}
    else:
        artifact = {"uri": quote(path.as_posix()), "uriBaseId": _SRCROOT}
    return {"physicalLocation": {"artifactLocation": artifact, "region": {"startLine": max(1, line)}}}


def _rule(rule_id: str) -> dict[str, Any]:
    rule = RULES[rule_id]
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "help": {"text": f"Fix: {rule.fix}", "markdown": f"**{rule.summary}**\n\nFix: {rule.fix}"},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["idempotency", "airflow"]},
    }


def _result(finding: RuleFinding, index: dict[str, int], occurrence: int) -> dict[str, Any]:
    """One result per code site; its tasks in ``properties.tasks`` and as logical locations.

    The fingerprint names the rule, file, message and the how-manieth site of those it is (`occurrence`),
    not the line (an edit above moves it) nor the tasks (a new DAG calling the helper is the same site)."""
    identity = "\0".join([finding.rule, finding.file, finding.message, str(occurrence)])
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": index[finding.rule],
        "level": "error",
        "message": {"text": f"{finding.message}. Fix: {finding.fix}"},
        "locations": [_location(finding.file, finding.line)],
        "partialFingerprints": {"idempotentSite/v2": hashlib.sha256(identity.encode()).hexdigest()},
    }
    owners = [(label, task) for dag, task in finding.reached_by() if (label := task_label(dag, task))]
    if owners:
        result["locations"][0]["logicalLocations"] = [
            {"fullyQualifiedName": label, "kind": "function" if task else "module"} for label, task in owners
        ]
        result["properties"] = {"tasks": [label for label, _task in owners]}
    if finding.acknowledged:
        result["suppressions"] = [{"kind": "inSource", "justification": finding.reason or ""}]
    return result


def _results(findings: list[RuleFinding], index: dict[str, int]) -> list[dict[str, Any]]:
    """A result per site; sites alike in rule, file and message are told apart by their rank."""
    seen: dict[tuple[str, str, str], int] = {}
    out = []
    for f in findings:
        key = (f.rule, f.file, f.message)
        seen[key] = seen.get(key, -1) + 1
        out.append(_result(f, index, seen[key]))
    return out


def to_sarif(report: LintReport) -> dict[str, Any]:
    """The report as one SARIF 2.1.0 log: one run, every rule, every finding (acknowledged ones
    suppressed in source)."""
    rule_ids = list(RULES)
    index = {rid: i for i, rid in enumerate(rule_ids)}
    notifications = [
        {"level": "warning", "message": {"text": n.message}, "locations": [_location(n.file, n.line)]}
        for n in report.notices
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": _TOOL,
                        "version": _version(),
                        "rules": [_rule(rid) for rid in rule_ids],
                    }
                },
                "originalUriBaseIds": {_SRCROOT: {"uri": Path(os.getcwd()).resolve().as_uri() + "/"}},
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
                "artifacts": [
                    {"location": _location(f, 1)["physicalLocation"]["artifactLocation"]}
                    for f in report.files
                ],
                "results": _results(report.findings, index),
            }
        ],
    }


def to_sarif_json(report: LintReport) -> str:
    """`to_sarif` as JSON text."""
    return json.dumps(to_sarif(report), indent=2)

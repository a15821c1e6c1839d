"""What real DAG repositories need from the linter (issue 19), beyond the labelled set's counts:
the newest Python grammar, one file's failure never ending the run, repositories kept apart, line
numbers from the parsed code, SARIF for code scanning, and the pre-commit hook."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from airflow_idempotent.lint import lint_paths, linter, pysyntax
from airflow_idempotent.lint.cli import main
from airflow_idempotent.lint.pysyntax import downgrade_312, parse_module
from airflow_idempotent.lint.rules import RULES
from airflow_idempotent.lint.sarif import to_sarif

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "lint_corpus"

NESTED_FSTRING_DAG = """\
import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

COLUMNS = ["order_id", "amount"]
LOAD = f"INSERT INTO orders_312 ({", ".join(COLUMNS)}) SELECT {", ".join(f"s.{c}" for c in COLUMNS)} FROM s"
type Row = dict[str, int]

with DAG(dag_id="py312", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    SQLExecuteQueryOperator(task_id="load", conn_id="warehouse", sql=LOAD)
"""

SHARED_TABLE_DAG = """\
import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(dag_id="{dag_id}", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    SQLExecuteQueryOperator(
        task_id="rewrite",
        conn_id="warehouse",
        sql="DELETE FROM shared_daily WHERE day = '{{{{ ds }}}}'; INSERT INTO shared_daily SELECT * FROM src",
    )
"""


# --- the newest grammar -----------------------------------------------------------------------------


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 reads the file itself")
def test_a_312_file_is_read_and_said_to_need_312(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pysyntax, "newer_pythons", lambda: ())  # only the rewrite can read it
    path = tmp_path / "dag_312.py"
    path.write_text(NESTED_FSTRING_DAG)
    report = lint_paths([path])
    assert [(f.rule, f.line) for f in report.failing] == [("IDEM002", 6)]
    (notice,) = report.notices
    assert notice.message.startswith("needs Python 3.12: run the linter under it")
    assert "note: needs Python 3.12" in report.to_text()


def _python_312() -> str | None:
    candidates = [p for _, p in pysyntax.newer_pythons() if p]
    root = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser()
    candidates += [str(p) for p in sorted(root.glob("versions/3.1[2-9]*/bin/python3.1[2-9]"))]
    for python in candidates:
        probe = "import sys; print(sys.version_info >= (3, 12))"
        version = subprocess.run([python, "-c", probe], capture_output=True)
        if version.returncode == 0 and version.stdout.strip() == b"True":
            return python
    return None


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 reads the file itself")
def test_a_newer_interpreter_reads_what_this_one_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    python = _python_312()
    if python is None:
        pytest.skip("no Python >= 3.12 on this machine")
    monkeypatch.setattr(pysyntax, "newer_pythons", lambda: (("3.12", python),))
    parsed = parse_module(NESTED_FSTRING_DAG)
    assert parsed.needs == "3.12" and parsed.how == f"with the grammar of {python}"
    assign = parsed.tree.body[4]
    assert isinstance(assign, ast.Assign) and assign.lineno == 6  # positions as the newer parser gave them
    assert isinstance(parsed.tree.body[5], ast.Assign)  # `type Row = ...` as this Python's nearest node
    with pytest.raises(SyntaxError):
        parse_module("print 'python 2'\n")


def test_the_312_rewrite_keeps_every_line_and_column() -> None:
    rewritten = downgrade_312(NESTED_FSTRING_DAG)
    assert len(rewritten) == len(NESTED_FSTRING_DAG)
    assert [i for i, c in enumerate(rewritten) if c == "\n"] == [
        i for i, c in enumerate(NESTED_FSTRING_DAG) if c == "\n"
    ]
    if sys.version_info < (3, 12):
        ast.parse(rewritten)


def test_invalid_python_is_still_idem000(tmp_path: Path) -> None:
    path = tmp_path / "broken_dag.py"
    path.write_text("from airflow.sdk import DAG\n<<<<<<< HEAD\nx = 1\n")
    (finding,) = lint_paths([path]).failing
    assert (finding.rule, finding.line) == ("IDEM000", 2)
    assert finding.message.startswith("not valid Python")


# --- one file's failure, several repositories ----------------------------------------------------------


def test_one_files_failure_is_its_finding_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = linter.check_task

    def failing(task, *args):  # type: ignore[no-untyped-def]
        if task.dag_id == "boom":
            raise KeyError("a shape the linter did not expect")
        return real(task, *args)

    monkeypatch.setattr(linter, "check_task", failing)
    (tmp_path / "a_boom.py").write_text(SHARED_TABLE_DAG.format(dag_id="boom"))
    (tmp_path / "b_fine.py").write_text((CORPUS / "c03_naive_append.py").read_text())
    report = lint_paths([tmp_path])
    by_file = {(Path(f.file).name, f.rule) for f in report.failing}
    assert by_file == {("a_boom.py", "IDEM000"), ("b_fine.py", "IDEM002")}
    (crash,) = [f for f in report.failing if f.rule == "IDEM000"]
    assert "the linter failed on this file (KeyError" in crash.message


def test_tables_of_different_repositories_are_never_paired(tmp_path: Path) -> None:
    one, two = tmp_path / "repo_one", tmp_path / "repo_two"
    for folder, dag_id in ((one, "first"), (two, "second")):
        folder.mkdir()
        (folder / f"{dag_id}.py").write_text(SHARED_TABLE_DAG.format(dag_id=dag_id))
    assert lint_paths([one, two]).failing == []
    together = tmp_path / "one_repo"
    together.mkdir()
    for dag_id in ("first", "second"):
        (together / f"{dag_id}.py").write_text(SHARED_TABLE_DAG.format(dag_id=dag_id))
    assert sorted(f.rule for f in lint_paths([together]).failing) == ["IDEM007", "IDEM007"]


# --- line numbers from the parsed code --------------------------------------------------------------


def test_findings_are_on_the_line_that_spells_them(tmp_path: Path) -> None:
    path = tmp_path / "spread_dag.py"
    path.write_text(
        "import pendulum\n"
        "from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator\n"
        "from airflow.sdk import DAG\n"
        "\n"
        'TARGET = "spread_daily"\n'
        'with DAG(dag_id="spread", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1)):\n'
        "    SQLExecuteQueryOperator(\n"
        '        task_id="load",\n'
        '        conn_id="warehouse",\n'
        "        sql=(\n"
        "            \"DELETE FROM audit WHERE day = '{{ ds }}'; \"\n"
        '            f"INSERT INTO {TARGET} "\n'
        '            "SELECT id, amount, "\n'
        '            "CURRENT_DATE AS load_day FROM src"\n'
        "        ),\n"
        "    )\n"
    )
    assert {(f.rule, f.line) for f in lint_paths([path]).failing} == {("IDEM002", 12), ("IDEM001", 14)}


# --- SARIF ------------------------------------------------------------------------------------------

#: The parts of the SARIF 2.1.0 schema GitHub code scanning requires of a log, its rules and results.
SARIF_REQUIRED = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "name": {"type": "string", "minLength": 1},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "name", "shortDescription", "help"],
                                            "properties": {
                                                "id": {"type": "string"},
                                                "shortDescription": {
                                                    "type": "object",
                                                    "required": ["text"],
                                                },
                                                "help": {"type": "object", "required": ["text"]},
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "message", "locations"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": 0},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {"type": "object", "required": ["text"]},
                                "locations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation", "region"],
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "required": ["uri"],
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "required": ["startLine"],
                                                        "properties": {
                                                            "startLine": {"type": "integer", "minimum": 1}
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                                "suppressions": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["kind"],
                                        "properties": {"kind": {"enum": ["inSource", "external"]}},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_sarif_is_a_valid_code_scanning_log(tmp_path: Path) -> None:
    (tmp_path / "dag_312.py").write_text(NESTED_FSTRING_DAG)
    names = ("c03_naive_append.py", "c17_acknowledged_append.py", "c16_target_twice.py")
    report = lint_paths([*(CORPUS / name for name in names), tmp_path / "dag_312.py"])
    log = to_sarif(report)
    jsonschema.validate(log, SARIF_REQUIRED)
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(RULES)
    assert {r["name"] for r in rules} == {r.name for r in RULES.values()}
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    assert len(run["results"]) == len(report.findings)
    suppressed = [r for r in run["results"] if r.get("suppressions")]
    assert [s["suppressions"][0]["justification"] for s in suppressed] == [
        "audit log: one row per attempt is the point"
    ]
    notified = run["invocations"][0]["toolExecutionNotifications"]
    assert [n["message"]["text"] for n in notified] == [n.message for n in report.notices]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert all(not uri.startswith("/") for uri in uris)


def test_cli_writes_sarif(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(CORPUS / "c03_naive_append.py"), "--format", "sarif"]) == 1
    log = json.loads(capsys.readouterr().out)
    jsonschema.validate(log, SARIF_REQUIRED)
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "IDEM002"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 22


# --- pre-commit -------------------------------------------------------------------------------------


def test_the_pre_commit_hook_runs_the_linter() -> None:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "airflow-idempotent-lint"
    assert hook["entry"] == "airflow-idempotent lint"
    assert hook["files"] == r"\.py$" and hook["language"] == "python"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = shlex.split(hook["entry"])
    naive = str(CORPUS / "c03_naive_append.py")
    bad = subprocess.run([*command, naive], capture_output=True, text=True, env=env)
    assert bad.returncode == 1, bad.stderr
    assert "IDEM002 append-insert" in bad.stdout
    good = subprocess.run(
        [*command, str(CORPUS / "c01_overwrite_operator.py"), str(REPO / "tools" / "lint_eval.py")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert good.returncode == 0, good.stdout + good.stderr

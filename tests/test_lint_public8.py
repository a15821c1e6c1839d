"""The linter's round-8 changes (issue 35, docs/lint-evaluation.md): each a principle stated once in
the module that owns the rule, tested here with a few hand-written lines. What each test asserts is
what a reviewer would say of the snippet, counted by hand (never read from the linter's tables):

- two tasks that only append rows to one table never touch each other's rows: the pair is
  information (each writer's own duplicates are its own IDEM002); two tasks that both add amounts
  to one column stay a defect (shared);
- a POST to Airflow's REST API that creates a DAG run with its logical date (or run id) in the
  body is keyed by it: Airflow refuses a second run with the same logical date (resubmit);
- the folded helpers read strings and names as before (resubmit's string text is the scope's,
  the gates' name loads are pyfacts').
"""

from __future__ import annotations

import ast
from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths
from airflow_idempotent.lint.textuse import name_loads
from tests.lintfiles import seen


def _lint(tmp_path: Path, files: dict[str, str]) -> LintReport:
    for name, text in files.items():
        path = tmp_path / "dags" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return lint_paths([tmp_path])


def _rules(items: list, rule: str) -> list[tuple[str, int]]:  # type: ignore[type-arg]
    return sorted((Path(f.file).name, f.line) for f in items if f.rule == rule)


_HEAD = """from datetime import datetime
from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
"""


def _dag(dag_id: str, task_id: str, sql: str) -> str:
    return (
        _HEAD
        + f"""
with DAG("{dag_id}", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    SQLExecuteQueryOperator(
        task_id="{task_id}",
        conn_id="dwh",
        sql="{sql}",
    )
"""
    )


# -- (a) IDEM007: writers that only append their own rows -----------------------------------------

_CONTROL = "INSERT INTO control_load (grain, ds) VALUES ('{grain}', '{{{{ ds }}}}')"
_ADD = "UPDATE reports SET total_submitted = total_submitted + {amount} WHERE id = 5"


def test_two_writers_that_only_append_their_own_rows_are_information(tmp_path: Path) -> None:
    """Each file's task (line 6) appends its DAG's control record to control_load (SQL on line 9;
    mitgate's shape): a rerun of either adds its own row again (IDEM002 on each, line 9) but never
    changes the other's row: the shared table is information on each task, not IDEM007."""
    report = _lint(
        tmp_path,
        {
            "hourly.py": _dag("hourly", "log_load", _CONTROL.format(grain="h")),
            "daily.py": _dag("daily", "log_load", _CONTROL.format(grain="d")),
        },
    )
    assert _rules(report.findings, "IDEM007") == []
    assert _rules(report.information, "IDEM007") == [("daily.py", 6), ("hourly.py", 6)]
    assert _rules(report.findings, "IDEM002") == [("daily.py", 9), ("hourly.py", 9)]


def test_two_writers_that_add_amounts_to_one_column_stay_a_defect(tmp_path: Path) -> None:
    """Both DAGs add to total_submitted of the same rows (tenminschool's quiz and video DAGs): a
    rerun of either adds on top of the other's total, so the pair stays IDEM007 on both tasks
    (each reported at its task, line 6)."""
    report = _lint(
        tmp_path,
        {
            "quiz.py": _dag("quiz", "sync", _ADD.format(amount=1)),
            "video.py": _dag("video", "sync", _ADD.format(amount=2)),
        },
    )
    assert _rules(report.findings, "IDEM007") == [("quiz.py", 6), ("video.py", 6)]


# -- (b) IDEM006: a DAG run triggered through Airflow's REST API, keyed by its logical date ---------

_TRIGGER = """from datetime import datetime
import json

import requests
from airflow import DAG
from airflow.operators.python import PythonOperator

URL = "https://airflow.example.org/api/v1/dags/marts/dagRuns"


def trigger(**context):
    data = {"conf": {}, "logical_date": context["ts"]}
    requests.post(URL, data=json.dumps(data))


with DAG("control", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False,
         default_args={"retries": 2}):
    PythonOperator(task_id="run_marts", python_callable=trigger)
"""


def test_a_dag_run_triggered_with_its_logical_date_is_keyed(tmp_path: Path) -> None:
    """Line 13 POSTs to /dagRuns with the run's logical date: a retry is refused by Airflow (409),
    so no IDEM006. The same POST with no logical date (a fresh run each time) stays a finding."""
    report = _lint(tmp_path, {"control.py": _TRIGGER})
    assert _rules(seen(report), "IDEM006") == []
    unkeyed = _TRIGGER.replace('"logical_date": context["ts"]', '"note": context["ts"]')
    report = _lint(tmp_path, {"control.py": unkeyed})
    assert _rules(seen(report), "IDEM006") == [("control.py", 13)]


# -- (c) the folded helpers ------------------------------------------------------------------------


def test_name_loads_lists_reads_not_assignments() -> None:
    """`x` is read twice (lines 2 and 3) and assigned once (line 1)."""
    tree = ast.parse("x = 1\ny = x + 1\nprint(x, y)\n")
    assert [n.lineno for n in name_loads(tree, "x")] == [2, 3]

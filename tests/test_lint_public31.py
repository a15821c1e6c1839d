"""Round 26 (issue 35, lint31, docs/lint-evaluation.md): what round 26's fresh batch showed, tested with
small hand-written DAG files. What each test asserts is what a reviewer reading the files would say.

- pass Culture's daily ``import_dms_subscriptions`` (``catchup=False``) imports the applications
  updated since ``{{ params.updated_since_jeunes }}``, whose default is ``(date.today() -
  timedelta(days=1)).strftime(..)`` written inline in ``Param(default=..)``. A scheduled run has no
  one to fill in the form: it takes the default, evaluated when the file is parsed, so the window is
  "yesterday by the clock", and a run cleared a few days later imports another span than its own.
  The linter reported the same shape when the clock was first kept in a module variable
  (``import_brevo``: ``yesterday = ..``, labelled useful, as ilri's report window was) but skipped it
  inline, as a UI default. The test fails on main eb55d23 (no finding); its guards (a DAG run by hand,
  ``schedule=None``, and one that says no schedule: UI defaults, filled in when triggered) pass there.
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import lint_files

_ONE_DAG = """\
from datetime import date, datetime, timedelta

from airflow import DAG
from airflow.models import Param
from airflow.operators.bash import BashOperator

with DAG(
    "{dag_id}",
    start_date=datetime(2024, 1, 1),{schedule}
    catchup=False,
    params={{"since": Param(default=(date.today() - timedelta(days=1)).strftime("%Y-%m-%d"), type="string")}},
) as dag:
    BashOperator(task_id="fetch", bash_command="fetch --since {{{{ params.since }}}}")
"""


def _dag(dag_id: str, schedule: str) -> str:
    return _ONE_DAG.format(dag_id=dag_id, schedule=f"\n    schedule={schedule}," if schedule else "")


def test_a_clock_default_of_a_scheduled_dags_params_is_its_window(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path,
        {
            "daily.py": _dag("daily", '"0 2 * * *"'),
            "helper.py": _dag("helper", 'get_airflow_schedule("0 2 * * *")'),
            "manual.py": _dag("manual", "None"),
            "unsaid.py": _dag("unsaid", ""),
        },
    )
    windows = {(f.dag_id, f.line) for f in report.findings if f.rule == "IDEM004"}
    # a scheduled run takes the default: today - 1 by the clock at parse time is its window (line 12)
    assert ("daily", 12) in windows and ("helper", 12) in windows, windows
    # guards: a DAG run by hand, or one that says no schedule, fills its params in when triggered
    assert not {d for d, _ in windows} & {"manual", "unsaid"}, windows
    assert not {f.dag_id for f in report.findings} & {"manual", "unsaid"}
    message = next(f.message for f in report.findings if f.dag_id == "daily" and f.rule == "IDEM004")
    assert "params" in message and "scheduled runs" in message, message

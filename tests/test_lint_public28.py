"""Round 24 (issue 35, lint28, docs/lint-evaluation.md): a miss of round 24's fresh batch, tested
with a small hand-written DAG file. What the test asserts is what a reviewer reading the file would
say; it fails on main befd095 (checked against main's package); its dotted-name and fixed-start
guards pass there too.

- rocs-org's DAGs start at ``today("UTC").add(days=-1)`` after ``from pendulum import today``: the bare
  name was not known as pendulum's clock, though ``pendulum.today(..)`` was (IDEM003, missed; with
  ``catchup=False`` such a start is information, as ``pendulum.today(..)``'s already was).

Not changed here (see the page): the python_callable rocs-org imports from another module of the
repository, which the linter still does not read (the round's one problem, missed).
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import lint_files

_MOVING_START = """\
from datetime import timedelta

import pendulum
from airflow import DAG
from airflow.operators.python import PythonOperator
from pendulum import today


def load(**kwargs):
    print(kwargs["ds"])


bare = DAG("bare_today", schedule=timedelta(days=1), start_date=today("UTC").add(days=-2))
PythonOperator(task_id="extract", python_callable=load, dag=bare)

dotted = DAG("dotted_today", schedule=timedelta(days=1), start_date=pendulum.today("UTC").add(days=-2))
PythonOperator(task_id="extract", python_callable=load, dag=dotted)

quiet = DAG("bare_no_catchup", schedule="@daily", start_date=today("UTC").add(days=-1), catchup=False)
PythonOperator(task_id="extract", python_callable=load, dag=quiet)

fixed = DAG("fixed_start", schedule=timedelta(days=1), start_date=pendulum.datetime(2024, 1, 1))
PythonOperator(task_id="extract", python_callable=load, dag=fixed)
"""


def test_a_bare_clock_name_imported_from_pendulum_is_a_clock_read(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"starts.py": _MOVING_START})
    starts = [(f.dag_id, f.line) for f in report.findings if f.rule == "IDEM003"]
    assert ("bare_today", 13) in starts
    # guards: the dotted spelling is still found; with catchup=False a start moving only at midnight
    # creates only the latest window (information, as for pendulum.today()); a fixed start is no read
    assert ("dotted_today", 16) in starts
    assert [f.rule for f in report.information if f.dag_id == "bare_no_catchup"] == ["IDEM003"]
    assert not [f for f in report.findings if f.dag_id == "bare_no_catchup"]
    assert not [f for f in [*report.findings, *report.information] if f.dag_id == "fixed_start"]

"""Round 24 (issue 35, lint28, docs/lint-evaluation.md): a miss of round 24's fresh batch and an open
item of round 23, tested with small hand-written DAG files. What each test asserts is what a reviewer
reading the files would say; both fail on main befd095 (checked against main's package); the first's
dotted-name and fixed-start guards and the second's guards pass there too.

- rocs-org's DAGs start at ``today("UTC").add(days=-1)`` after ``from pendulum import today``: the bare
  name was not known as pendulum's clock, though ``pendulum.today(..)`` was (IDEM003, missed; with
  ``catchup=False`` such a start is information, as ``pendulum.today(..)``'s already was).

- coherent's hourly decode DAGs (round 23) start at ``now() - 1 day`` with catchup=False: a start two
  periods or more behind the clock is before the latest finished window, the only one created
  (IDEM003 harmless -> information).

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


_LAGGING_START = """\
from datetime import datetime, timedelta

import pendulum
from airflow import DAG
from airflow.operators.python import PythonOperator


def load(**kwargs):
    print(kwargs["ds"])


hourly = DAG("hourly", schedule="@hourly", start_date=datetime.now() - timedelta(days=1), catchup=False)
PythonOperator(task_id="decode", python_callable=load, dag=hourly)
shifted = DAG("shifted", schedule="0 * * * *", start_date=pendulum.now().subtract(hours=3), catchup=False)
PythonOperator(task_id="decode", python_callable=load, dag=shifted)
daily = DAG("daily", schedule="@daily", start_date=datetime.now() - timedelta(days=1), catchup=False)
PythonOperator(task_id="decode", python_callable=load, dag=daily)
caught = DAG("caught", schedule="@hourly", start_date=datetime.now() - timedelta(days=1), catchup=True)
PythonOperator(task_id="decode", python_callable=load, dag=caught)
"""

_DEFAULTED_START = """\
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.python import PythonOperator

args = {"owner": "data", "start_date": datetime.now() - timedelta(days=1)}
defaulted = DAG("defaulted", default_args=args, schedule_interval="0 * * * *", catchup=False)
PythonOperator(task_id="decode", python_callable=print, dag=defaulted)
"""


def test_a_start_lagging_two_periods_behind_the_clock_without_catchup_is_information(tmp_path: Path) -> None:
    """Round 23's open item (coherent's decode DAGs, 16 harmless): ``now() - 1 day`` on an hourly
    schedule with catchup=False. The latest finished window always starts after such a start, and it is
    the only one the scheduler creates: the moving start changes nothing that runs."""
    report = lint_files(tmp_path, {"lag.py": _LAGGING_START, "defaulted.py": _DEFAULTED_START})
    starts = {f.dag_id for f in report.findings if f.rule == "IDEM003"}
    listed = {f.dag_id for f in report.information if f.rule == "IDEM003"}
    assert {"hourly", "shifted", "defaulted"} <= listed and not {"hourly", "shifted", "defaulted"} & starts
    # guards: one period of lag (a daily window comes due only by a race at midnight) and catchup on
    # stay findings
    assert {"daily", "caught"} <= starts

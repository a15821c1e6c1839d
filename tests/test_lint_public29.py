"""Round 25 (issue 35, lint29, docs/lint-evaluation.md): what round 25's fresh batch showed, tested with
small hand-written DAG files. What each test asserts is what a reviewer reading the files would say;
both fail on main f6bfb05 (checked against main's package); the first's guards pass there too, the
second's catchup=False guard does not (main gives the wrong reason).

- BerlinzuDir's seven shop DAGs start at ``days_ago(1)`` on a daily schedule with catchup on (its
  ``airflow.cfg``): the first window such a start allows is the latest finished one, and after a pause
  the scheduler resumes from the start, not from the last run, so catchup creates only the latest
  window, as catchup=False would (IDEM003 harmless -> information).

- hasadna's generated DAGs take ``schedule_interval=("10 0 * * *" if scheduled else None)``: the
  linter read a schedule chosen by a condition as no time-based schedule at all, so a moving start on
  it was listed as creating no windows (there with catchup=False, so information either way; with
  catchup on, a finding hidden).
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import lint_files

_ONE_DAY_BACK = """\
from datetime import datetime, timedelta

import pendulum
from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.utils.dates import days_ago


def load(**kwargs):
    print(kwargs["ds"])


shop = DAG("shop", schedule_interval=timedelta(days=1), start_date=days_ago(1))
PythonOperator(task_id="push", python_callable=load, dag=shop)
cron = DAG("cron", schedule_interval="10 0 * * *", start_date=pendulum.today("UTC").add(days=-1))
PythonOperator(task_id="push", python_callable=load, dag=cron)

two_days = DAG("two_days", schedule_interval=timedelta(days=1), start_date=days_ago(2))
PythonOperator(task_id="push", python_callable=load, dag=two_days)
weekly = DAG("weekly", schedule_interval="@weekly", start_date=days_ago(1))
PythonOperator(task_id="push", python_callable=load, dag=weekly)
hourly = DAG("hourly", schedule_interval="@hourly", start_date=days_ago(1))
PythonOperator(task_id="push", python_callable=load, dag=hourly)
clock = DAG("clock", schedule_interval="@daily", start_date=datetime.now() - timedelta(days=1))
PythonOperator(task_id="push", python_callable=load, dag=clock)
"""


def test_a_midnight_start_one_day_back_on_a_daily_schedule_is_information(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"shops.py": _ONE_DAY_BACK})
    raised = {f.dag_id for f in report.findings if f.rule == "IDEM003"}
    listed = {f.dag_id for f in report.information if f.rule == "IDEM003"}
    assert {"shop", "cron"} <= listed and not {"shop", "cron"} & raised
    # guards: two days back (a first deployment makes two runs), a weekly window that never comes due
    # while the start moves daily, an hourly schedule (24 windows from yesterday's midnight), and a start
    # read from now() (not at midnight: the race round 24 kept) stay findings
    assert {"two_days", "weekly", "hourly", "clock"} <= raised
    assert not {"two_days", "weekly", "hourly", "clock"} & listed


_CHOSEN_SCHEDULE = """\
import os

from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.utils.dates import days_ago

SCHEDULED = os.environ.get("SCHEDULED") == "1"


def run(**kwargs):
    print(kwargs["ds"])


moving = DAG("moving", schedule_interval=("@daily" if SCHEDULED else None), start_date=days_ago(2))
PythonOperator(task_id="run", python_callable=run, dag=moving)
quiet = DAG(
    "quiet", schedule_interval=("10 0 * * *" if SCHEDULED else None), start_date=days_ago(2), catchup=False
)
PythonOperator(task_id="run", python_callable=run, dag=quiet)
manual = DAG("manual", schedule_interval=None, start_date=days_ago(2))
PythonOperator(task_id="run", python_callable=run, dag=manual)
"""


def test_a_schedule_chosen_by_a_condition_is_time_based_when_a_choice_is(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"chosen.py": _CHOSEN_SCHEDULE})
    raised = {f.dag_id for f in report.findings if f.rule == "IDEM003"}
    assert "moving" in raised
    # guards: with catchup=False the midnight start is information for its own reason, not for "no
    # time-based schedule"; schedule=None stays a schedule with no windows
    quiet = [f.message for f in report.information if f.dag_id == "quiet" and f.rule == "IDEM003"]
    assert len(quiet) == 1 and "catchup=False" in quiet[0] and "no time-based schedule" not in quiet[0]
    manual = [f.message for f in report.information if f.dag_id == "manual" and f.rule == "IDEM003"]
    assert len(manual) == 1 and "no time-based schedule" in manual[0]
    assert "manual" not in raised

"""Round 25 (issue 35, lint29, docs/lint-evaluation.md): what round 25's fresh batch showed, tested with
small hand-written DAG files. What each test asserts is what a reviewer reading the files would say.

- BerlinzuDir's seven shop DAGs start at ``days_ago(1)`` on a daily schedule with catchup on (its
  ``airflow.cfg``). Catchup creates there only the latest window, as catchup=False would, but the
  start still matters: ``DagRun.verify_integrity`` (Airflow 3.3, ``airflow/models/dagrun.py``) creates
  a task instance only for a task whose start_date is on or before the run's logical date, unless the
  run is a backfill, so a run triggered by hand for an earlier window gets no task instances and
  succeeds having run nothing. The moving start stays IDEM003, and its message says so (the first
  test; its message assertion fails on main f6bfb05, its finding assertions pass there).

- hasadna's generated DAGs take ``schedule_interval=("10 0 * * *" if scheduled else None)``: the
  linter read a schedule chosen by a condition as no time-based schedule at all, so a moving start on
  it was listed as creating no windows (there with catchup=False, so information either way; with
  catchup on, a finding hidden). The second test fails on main f6bfb05; its catchup=False guard fails
  there too (main gives the wrong reason).
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import lint_files

_ONE_DAY_BACK = """\
import pendulum
from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.utils.dates import days_ago


def load(**kwargs):
    print(kwargs["ds"])


shop = DAG("shop", schedule_interval="@daily", start_date=days_ago(1))
PythonOperator(task_id="push", python_callable=load, dag=shop)
cron = DAG("cron", schedule_interval="10 0 * * *", start_date=pendulum.today("UTC").add(days=-1))
PythonOperator(task_id="push", python_callable=load, dag=cron)
quiet = DAG("quiet", schedule_interval="@daily", start_date=days_ago(1), catchup=False)
PythonOperator(task_id="push", python_callable=load, dag=quiet)
"""


def test_a_midnight_start_one_day_back_with_catchup_stays_a_finding(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"shops.py": _ONE_DAY_BACK})
    raised = {f.dag_id: f.message for f in report.findings if f.rule == "IDEM003"}
    listed = {f.dag_id for f in report.information if f.rule == "IDEM003"}
    # catchup creates only the latest window here, yet a run triggered by hand for an earlier logical
    # date gets no task instances (verify_integrity's task_filter): the start is not moot
    assert {"shop", "cron"} <= raised.keys() and not {"shop", "cron"} & listed
    for dag_id in ("shop", "cron"):
        assert "earlier date gets no task instances" in raised[dag_id], raised[dag_id]
    # guard: with catchup=False the midnight start stays information, as on main
    assert "quiet" in listed and "quiet" not in raised


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

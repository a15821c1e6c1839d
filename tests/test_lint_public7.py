"""The linter's round-7 changes (issue 35, docs/lint-evaluation.md): each a principle stated once in
the module that owns the rule, tested here with a few hand-written lines. What each test asserts is
what a reviewer would say of the snippet, counted by hand (never read from the linter's tables):

- the run's start (``{{ dag_run.start_date }}``, ``{{ ti.start_date }}``) is the wall clock, not the
  run's window: in SQL a clock read like ``now()``, handed to a task's code a window taken from the
  clock (sqlchecks); a TaskFlow call's positional arguments are templated like its keywords, and the
  tasks of ``with dag:`` (``dag = DAG(..)`` first) belong to that DAG (collect);
- a span-shifted clock that only decides whether the run goes ahead is a readiness gate, and a
  Variable only compared with a constant is a done-flag, not a watermark (gates);
- a helper that only returns the clock, called only to be printed, reaches no data (gates).
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths


def _lint(tmp_path: Path, text: str) -> LintReport:
    path = tmp_path / "dags" / "job.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return lint_paths([tmp_path])


def _rules(items: list) -> list[tuple[str, int]]:  # type: ignore[type-arg]
    return sorted((f.rule, f.line) for f in items)


_HEAD = """from datetime import datetime, timedelta
from airflow import DAG
from airflow.decorators import task
from airflow.models import Variable
from airflow.operators.python import PythonOperator
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
"""

# -- (a) the run's wall-clock start ---------------------------------------------------------------

_RUN_START = (
    _HEAD
    + """
dag = DAG("alarms_5m", schedule="*/5 * * * *", start_date=datetime(2024, 1, 1), catchup=False)


def aggregate(start_date):
    moment = datetime.strptime(start_date, "%Y-%m-%d %H:%M:%S.%f%z")
    return moment - timedelta(minutes=5), moment


with dag:

    @task
    def select_rows(start_date):
        return aggregate(start_date)

    start_date = "{{ dag_run.start_date }}"
    select_rows(start_date)
    PythonOperator(task_id="load_control", python_callable=aggregate,
                   op_kwargs={"start_date": "{{ ti.start_date }}"})
    SQLExecuteQueryOperator(task_id="purge", conn_id="pg",
                            sql="DELETE FROM alarms WHERE ts < '{{ dag_run.start_date }}'")
    PythonOperator(task_id="by_window", python_callable=aggregate,
                   op_kwargs={"start_date": "{{ data_interval_start }}"})
"""
)


def test_the_runs_start_handed_to_code_is_a_window_taken_from_the_clock(tmp_path: Path) -> None:
    """Lines 22 and 25: the run's (the try's) start handed to a task's code, positionally (the name
    is bound on line 22) and as op_kwargs; the code takes its 5 minutes back from it. A run cleared
    tomorrow aggregates tomorrow's 5 minutes: IDEM004 each. Line 27: the same value in SQL reads
    the clock as now() would: IDEM001. Line 29: the data interval is the run's window: nothing."""
    report = _lint(tmp_path, _RUN_START)
    assert _rules(report.findings) == [("IDEM001", 27), ("IDEM004", 22), ("IDEM004", 25)]
    assert all("wall-clock start" in f.message for f in report.findings)
    assert {f.dag_id for f in report.findings} == {"alarms_5m"}  # `with dag:` attaches the tasks


def test_a_record_of_the_runs_metadata_is_not_read_as_the_runs_window(tmp_path: Path) -> None:
    """adapstory's shape: the run's start as one field of a record of the run (run id, start) handed
    to the code; it describes the run, no window is taken from it: no finding."""
    text = (
        _HEAD
        + """
with DAG("observe", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False) as dag:
    PythonOperator(task_id="record", python_callable=print,
                   op_kwargs={"run": {"runId": "{{ run_id }}", "startDate": "{{ dag_run.start_date }}"}})
"""
    )
    assert _lint(tmp_path, text).findings == []


# -- (b) readiness gates and done-flags -------------------------------------------------------------

_GATE = (
    _HEAD
    + """
from airflow.exceptions import AirflowSkipException


def ready(saved):
    now = datetime.now()
    return datetime.strptime(saved, "%Y-%m-%d") < now - timedelta(hours=3)


def gated():
    saved = Variable.get("start", default_var="2024-01-01")
    if not ready(saved):
        raise AirflowSkipException("too early")
    print(saved)


def skipped():
    start = datetime.strptime(Variable.get("start2"), "%Y-%m-%d")
    if start > datetime.now() - timedelta(minutes=30):
        raise AirflowSkipException("too early")


def last_day(rows):
    cutoff = datetime.now() - timedelta(days=1)
    return [row for row in rows if row["ts"] > cutoff]


with DAG("gates", schedule="@hourly", start_date=datetime(2024, 1, 1), catchup=False) as dag:
    PythonOperator(task_id="gated", python_callable=gated)
    PythonOperator(task_id="skipped", python_callable=skipped)
    PythonOperator(task_id="last_day", python_callable=last_day)
"""
)


def test_a_shifted_clock_that_only_gates_the_run_is_a_readiness_gate(tmp_path: Path) -> None:
    """Line 12: ``now - 3h`` is only the answer of ``ready()``, whose one call is the test of an
    ``if`` that skips: a gate. Line 25: the same, written inline. Neither reads a span: information.
    Line 30: ``now - 1 day`` filters rows in a comprehension: the last day, a relative window."""
    report = _lint(tmp_path, _GATE)
    assert _rules(report.findings) == [("IDEM004", 30)]
    gates = [i for i in report.information if "readiness gate" in i.message]
    assert _rules(gates) == [("IDEM004", 12), ("IDEM004", 25)]


_FLAG = (
    _HEAD
    + """

def load():
    full_load = Variable.get("full_load_done", default_var="false") == "true"
    print("incremental" if full_load else "full")
    Variable.set("full_load_done", "true")


def pull():
    since = Variable.get("pulled_until")
    Variable.set("pulled_until", "2024-01-02")
    return since


with DAG("flags", schedule="@hourly", start_date=datetime(2024, 1, 1), catchup=False) as dag:
    PythonOperator(task_id="load", python_callable=load)
    PythonOperator(task_id="pull", python_callable=pull)
"""
)


def test_a_variable_only_compared_with_a_constant_is_a_flag_not_a_watermark(tmp_path: Path) -> None:
    """``load`` reads a Variable only to compare it with ``"true"`` (line 10): whether the full load
    happened, no window starts at it. ``pull`` reads a value it saves (line 16) and returns it as is
    (the start of what it pulls): the watermark finding stays, on ``pull`` alone."""
    report = _lint(tmp_path, _FLAG)
    watermarks = [f for f in report.findings if f.rule == "IDEM004"]
    assert [(f.task_id, f.line) for f in watermarks] == [("pull", 16)]


# -- (c) a clock only printed through a helper -------------------------------------------------------

_PRINTED = (
    _HEAD
    + """

def _now_utc():
    return datetime.now()


def sync():
    now = _now_utc()
    print(f"now={now.isoformat()}")


def stamp():
    return {"since": _now_utc()}


with DAG("helpers", schedule="@hourly", start_date=datetime(2024, 1, 1), catchup=False) as dag:
    PythonOperator(task_id="sync", python_callable=sync)
    PythonOperator(task_id="keep", python_callable=stamp)
"""
)


def test_a_clock_returned_by_a_helper_only_to_be_printed_reaches_no_data(tmp_path: Path) -> None:
    """Line 10: ``_now_utc()`` only returns the clock. ``sync`` only prints its call: information.
    ``keep`` returns it in a record another task pulls: the same read stays IDEM003 for it."""
    report = _lint(tmp_path, _PRINTED)
    assert [(f.rule, f.task_id, f.line) for f in report.findings] == [("IDEM003", "keep", 10)]
    printed = [i for i in report.information if "printed or logged" in i.message]
    assert [(i.rule, i.task_id, i.line) for i in printed] == [("IDEM003", "sync", 10)]


# -- (d) a resubmitted ingestion that replaces its interval ---------------------------------------

_DRUID = (
    _HEAD
    + """
import json
import requests


def spec(day):
    return {"type": "index_parallel", "ioConfig": {"appendToExisting": False, "interval": day}}


def statement(day):
    return f"REPLACE INTO metrics_daily OVERWRITE WHERE __time >= TIMESTAMP '{day}' SELECT * FROM metrics"


def submit(ds):
    body = json.dumps(spec(ds))
    requests.post("http://druid/druid/indexer/v1/task", data=body)
    requests.post("http://druid/druid/v2/sql/task", json={"query": statement(ds)})
    requests.post("http://shop/orders", json={"order": ds})


with DAG("druid", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False,
         default_args={"retries": 2}) as dag:
    PythonOperator(task_id="submit", python_callable=submit)
"""
)


def test_a_retried_ingestion_that_replaces_its_interval_is_information(tmp_path: Path) -> None:
    """Lines 22 and 23 submit, with retries=2, a spec with appendToExisting false and a REPLACE ..
    OVERWRITE statement, each built by a function of the file: a second send rewrites the same day,
    information. Line 24 posts an order: sent twice, two orders, IDEM006 stays."""
    report = _lint(tmp_path, _DRUID)
    assert _rules(report.findings) == [("IDEM006", 24)]
    replaced = [i for i in report.information if "replaces its interval" in i.message]
    assert _rules(replaced) == [("IDEM006", 22), ("IDEM006", 23)]

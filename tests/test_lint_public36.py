"""Round 28b (issue 35, lint36, docs/lint-evaluation.md): round 28's batch is tuning data now; the
general shapes behind its false findings, tested with small hand-written DAG and SQL files. What each
test asserts is what a reviewer reading the files would say; each case fails on main 21f8ac3 (checked
against main's package), and its guards (what must stay raised) are raised there too.

- a (IDEM004): ``CURRENT_DATE - col`` (shifted or not, the column cast or not) in a query's output,
  in no predicate, of a statement that writes nothing: the days since each row's date, an age shown
  in an alert's text (two outage checks), not the bound of a window. Listed as information.
- b (IDEM004): ``(datetime.now() - parsed).days``: the ``.days`` of a difference is a duration's
  (a datetime has ``.day``), so the other side was a datetime: an age (a freshness check's "days
  old"), not "now minus a span".
- c (IDEM002): ``try: cur.execute("INSERT ..") except psycopg.errors.UniqueViolation: raise
  AirflowSkipException(..)`` (a GTFS feed's ``insert_date``): catching the duplicate-key error around
  the insert says a unique key refuses a rerun's row. Listed as information; an insert outside the
  ``try`` body, or a ``try`` catching other errors, stays raised.
- d (IDEM004/IDEM003, a miss): ``dag_params = {"month": Param((date.today() - relativedelta(months=1))
  ..)}`` handed to a scheduled DAG as ``params=dag_params`` or through ``dag_config = {"params":
  dag_params}`` and ``@dag(**dag_config)`` (orca's scheduled DAGs): round 26's rule (a clock default of
  a scheduled DAG's params is its window) now reaches the spelling outside the DAG call. A DAG run by
  hand (``schedule=None``) keeps it a UI default.
- e (IDEM004): ``date.today() - timedelta(hours=h)`` in a task named for composing a message
  (``generate_top_downloads_message``) only names the day in the text it returns for Slack: as a
  ``*slack*`` function already was. A task named for consuming messages, or for anything else, stays
  raised.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import lint_files

_SQL_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG("checks", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False) as dag:
    SQLExecuteQueryOperator(task_id="check", conn_id="pg", sql={sql!r})
"""


def _sql(tmp_path: Path, sql: str) -> LintReport:
    return lint_files(tmp_path, {"dags/checks.py": _SQL_DAG.format(sql=sql)})


def _rules(report: LintReport, rule: str) -> list[int]:
    return [f.line for f in report.findings if f.rule == rule]


def test_a_clock_minus_a_column_in_the_output_is_an_age(tmp_path: Path) -> None:
    for sql in (
        "SELECT site || ' (' || CURRENT_DATE - 1 - last_active::date || ' days)' AS msg FROM s",
        "SELECT name, CURRENT_DATE - oi.range_start AS days_out FROM s AS oi",
        "SELECT name, (now() - s.seen_at) AS age FROM s",
    ):
        report = _sql(tmp_path, sql)
        assert not _rules(report, "IDEM004"), (sql, report.findings)
        said = [f for f in report.information if f.rule == "IDEM004"]
        assert said and "an age" in said[0].message, (sql, report.information)


def test_a_guard_a_window_read_or_a_written_age_stays_raised(tmp_path: Path) -> None:
    # a lower bound in a predicate is "the last N"; an age in a predicate is that bound rewritten;
    # an age written to a table is a value of the clock that a late rerun changes
    for sql in (
        "SELECT * FROM s WHERE dt >= CURRENT_DATE - 7",
        "SELECT * FROM s WHERE CURRENT_DATE - dt < 7",
        "INSERT INTO t SELECT id, CURRENT_DATE - start_dt FROM s",
        "SELECT id, CURRENT_DATE - 7 AS since FROM s",
    ):
        report = _sql(tmp_path, sql)
        assert _rules(report, "IDEM004") or _rules(report, "IDEM001"), (sql, report.findings)
        assert not [f for f in report.information if "an age" in f.message], (sql, report.information)


_PY_DAG = """\
from datetime import datetime, timedelta

import requests
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
def freshness():
    @task
    def check(**context):
        last = datetime.fromisoformat(requests.get("https://portal/api").json()["last_refreshed"])
{body}

    check()


freshness()
"""


def _py(tmp_path: Path, body: str) -> LintReport:
    text = _PY_DAG.format(body="\n".join("        " + line for line in body.splitlines()))
    return lint_files(tmp_path, {"dags/freshness.py": text})


def test_b_days_of_now_minus_a_date_is_an_age(tmp_path: Path) -> None:
    for body in (
        "days_old = (datetime.now() - last).days\n"
        'context["ti"].xcom_push(key="msg", value=f"{days_old} days")',
        'age = datetime.now() - last\nif age.days > 3:\n    raise ValueError(f"{age.days} days old")',
    ):
        report = _py(tmp_path, body)
        assert not _rules(report, "IDEM004") and not _rules(report, "IDEM003"), (body, report.findings)


def test_b_guard_now_minus_a_span_stays_raised(tmp_path: Path) -> None:
    # a datetime shifted by a span read as a window's start; .day (a datetime's) is no duration
    for body in (
        'since = datetime.now() - timedelta(days=3)\nrequests.post("https://sink", json=requests.get('
        '"https://portal/api", params={"since": since.isoformat()}).json())',
        'day = (datetime.now() - timedelta(days=1)).day\nrequests.post("https://sink", json=requests.get('
        '"https://portal/api", params={"day": day}).json())',
    ):
        report = _py(tmp_path, body)
        assert _rules(report, "IDEM004"), (body, report.findings)


_KEY_DAG = """\
from datetime import datetime

import psycopg
from airflow.exceptions import AirflowSkipException
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
def feed():
    @task
    def register(**context):
        con = PostgresHook("gtfs").get_conn()
{body}

    register()


feed()
"""


def _key(tmp_path: Path, body: str) -> LintReport:
    text = _KEY_DAG.format(body="\n".join("        " + line for line in body.splitlines()))
    return lint_files(tmp_path, {"dags/feed.py": text})


_INSERT = 'cur.execute("INSERT INTO gtfs.feed_info (insert_date) SELECT %s", (context["ds"],))'


def test_c_an_insert_whose_duplicate_key_error_is_caught(tmp_path: Path) -> None:
    for caught in ("psycopg.errors.UniqueViolation", "(ValueError, IntegrityError)"):
        body = (
            f"try:\n    with con.cursor() as cur:\n        {_INSERT}\n    con.commit()\n"
            f'except {caught}:\n    raise AirflowSkipException("already loaded")'
        )
        report = _key(tmp_path, body)
        assert not _rules(report, "IDEM002"), (caught, report.findings)
        said = [f for f in report.information if f.rule == "IDEM002"]
        assert said and "unique key" in said[0].message, (caught, report.information)


def test_c_guard_no_duplicate_key_catch_stays_raised(tmp_path: Path) -> None:
    for body in (
        f"with con.cursor() as cur:\n    {_INSERT}",
        f"try:\n    with con.cursor() as cur:\n        {_INSERT}\n"
        "except psycopg.OperationalError:\n    raise",
        f"try:\n    con.rollback()\nexcept psycopg.errors.UniqueViolation:\n    pass\n"
        f"with con.cursor() as cur:\n    {_INSERT}",
    ):
        report = _key(tmp_path, body)
        assert _rules(report, "IDEM002"), (body, report.findings)


_PARAMS_DAG = """\
from datetime import date, datetime

from airflow.sdk import Param, dag, task
from dateutil.relativedelta import relativedelta

dag_params = {{
    "conn_id": Param("SNOWFLAKE", type="string"),
    "month_to_run": Param((date.today() - relativedelta(months=1)).strftime("%Y-%m-%d"), type="string"),
}}
dag_config = {{"schedule": {schedule}, "start_date": datetime(2025, 1, 1), "catchup": False, {params}}}


@dag(**dag_config)
def monthly():
    @task
    def push(**context):
        month = context["params"]["month_to_run"]
        return f"SELECT * FROM usage WHERE DATE_TRUNC('MONTH', day) = DATE('{{month}}')"

    push()


monthly()
"""


def _params(tmp_path: Path, schedule: str, params: str) -> LintReport:
    text = _PARAMS_DAG.format(schedule=schedule, params=params)
    return lint_files(tmp_path, {"dags/monthly.py": text})


def test_d_a_clock_param_default_handed_on_by_a_dict(tmp_path: Path) -> None:
    for params in ('"params": dag_params', '"params": {"extra": 1, **dag_params}'):
        report = _params(tmp_path, '"0 0 2 * *"', params)
        raised = [f for f in report.findings if f.rule == "IDEM004" and f.line == 8]
        assert raised and "params" in raised[0].message, (params, report.findings)


def test_d_guard_a_hand_run_dag_or_params_not_taken(tmp_path: Path) -> None:
    for schedule, params in (("None", '"params": dag_params'), ('"0 0 2 * *"', '"tags": ["x"]')):
        report = _params(tmp_path, schedule, params)
        assert not [f for f in report.findings if f.line == 8], (schedule, params, report.findings)


_MESSAGE_DAG = """\
from datetime import date, datetime, timedelta

import requests
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
def report():
    @task
    def {name}(rows, **context):
        hours = int(context["params"]["hours"])
        day = (date.today() - timedelta(hours=hours)).isoformat()
        {body}

    {name}([])


report()
"""


def test_e_a_day_in_a_composed_message(tmp_path: Path) -> None:
    body = 'return f"Top downloads {day}: " + ", ".join(rows)'
    for name in ("generate_top_downloads_message", "build_msg"):
        files = {"dags/report.py": _MESSAGE_DAG.format(name=name, body=body)}
        report = lint_files(tmp_path, files)
        assert not _rules(report, "IDEM004"), (name, report.findings)
        said = [f for f in report.information if f.rule == "IDEM004"]
        assert said and "chat message" in said[0].message, (name, report.information)


def test_e_guard_other_tasks_keep_the_window(tmp_path: Path) -> None:
    body = 'return requests.get("https://api/downloads", params={"day": day}).json()'
    for name in ("process_message", "pull_downloads", "message_counts"):
        files = {"dags/report.py": _MESSAGE_DAG.format(name=name, body=body)}
        report = lint_files(tmp_path, files)
        assert _rules(report, "IDEM004"), (name, report.findings)

"""Round 36d of issue 35 (lint57, docs/lint-evaluation.md): IDEM004 raised as a defect only where the
relative window's clock value can reach data.

A window "the last N days before now" whose value the linter follows to nothing (never read, a bare
expression), only to a log line or a message's text (an e-mail's subject), only to a retention cutoff
(deleting what is older: a query's ``.filter(..).delete()``, an ``if`` whose body unlinks, a
``DELETE .. <`` text, a call named for deleting) or only to its task's return value, an XCom no task
pulls, chooses no data a rerun reads or writes: information, saying why and what would make it a
defect. Where the value reaches a query's text, a path, a call the linter does not follow, another
comparison (newer rows deleted, older rows loaded), or an XCom a task pulls (a template's
``xcom_pull``, a TaskFlow output taken or kept in a name), it stays a finding. On 01beb75's package
11 of these 22 tests fail (the harmless shapes and the catch-up one); the 11 that pass there are the
counter-shapes. Lines are counted by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_idempotent.lint import LintReport
from tests.lintfiles import finding_rows, lint_files

_DAG = """\
import logging
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook


def work():
{body}


with DAG("window", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="work", python_callable=work)
"""

#: the window's clock read is on line 10 (the body's first line) in every shape
_LINE = 10

#: shapes whose value reaches data: the finding stands
_DEFECTS = {
    "sql_filter": (
        "    start = datetime.now() - timedelta(days=1)\n"
        "    PostgresHook().run(f\"INSERT INTO sales SELECT * FROM src WHERE day >= '{start}'\")"
    ),
    "path_written": (
        "    day = (datetime.now() - timedelta(days=1)).strftime('%Y-%m-%d')\n"
        "    upload(f's3://bucket/sales/{day}.csv', fetch_rows())"
    ),
    "unknown_call": (
        "    since = datetime.now() - timedelta(hours=6)\n"
        "    rows = client.pull(since)\n"
        "    PostgresHook().insert_rows('events', rows)"
    ),
    "filter_comparison": (
        "    cutoff = datetime.now() - timedelta(days=7)\n"
        "    rows = [r for r in fetch_rows() if r['ts'] >= cutoff]\n"
        "    PostgresHook().insert_rows('events', rows)"
    ),
    "newer_rows_deleted": (
        "    cutoff = datetime.now() - timedelta(days=2)\n"
        "    session.query(Sale).filter(Sale.day >= cutoff).delete()\n"
        "    PostgresHook().run('INSERT INTO sales SELECT * FROM src')"
    ),
    "older_rows_loaded": (
        "    cutoff = datetime.now() - timedelta(days=2)\n"
        "    PostgresHook().run(f\"INSERT INTO old_sales SELECT * FROM src WHERE day < '{cutoff}'\")"
    ),
    "year_of_another_value": (
        "    day = day.replace(year=datetime.now().year - 1)\n    PostgresHook().insert_rows('files', [day])"
    ),
    "logged_and_used": (
        "    start = datetime.now() - timedelta(days=1)\n"
        "    logging.info('loading since %s', start)\n"
        "    PostgresHook().run('INSERT INTO sales SELECT * FROM src WHERE day >= %s', parameters=[start])"
    ),
}

#: shapes whose value provably reaches no data: information, with the reason
_HARMLESS = {
    "never_read": (
        "    yesterday = datetime.now() - timedelta(days=1)\n"
        "    PostgresHook().run('INSERT INTO sales SELECT * FROM src')",
        "its value (yesterday) is never read",
    ),
    "log_only": (
        "    logging.info('loading since %s', datetime.now() - timedelta(days=1))\n"
        "    PostgresHook().run('INSERT INTO sales SELECT * FROM src')",
        "its value is only shown in a log line or message",
    ),
    "bare_expression": (
        "    datetime.now() - timedelta(days=1)\n"
        "    PostgresHook().run('INSERT INTO sales SELECT * FROM src')",
        "its value is not kept",
    ),
    "mail_subject": (
        "    yesterday = datetime.now() - timedelta(days=1)\n"
        "    send_mail(to='team@example.com', subject=f'Sales of {yesterday:%d.%m}', body='see the board')",
        "its value is only subject=, the text of a message",
    ),
    "xcoms_deleted": (
        "    cutoff = datetime.now(pytz.utc) - timedelta(days=2)\n"
        "    cutoff = cutoff.astimezone(pytz.utc)\n"
        "    session.query(XCom).filter(XCom.execution_date < cutoff).delete(synchronize_session=False)",
        "it is only a retention cutoff",
    ),
    "files_removed": (
        "    oldest = (datetime.now() - timedelta(days=30)).timestamp()\n"
        "    for path in Path('/data/exports').iterdir():\n"
        "        if path.stat().st_mtime < oldest:\n"
        "            path.unlink()",
        "it is only a retention cutoff",
    ),
    "objects_deleted": (
        "    old = datetime.now() - timedelta(days=30)\n"
        "    S3Hook().delete_objects(bucket='backups', keys=[f'db/backup_{old:%Y%m%d}.gz'])",
        "it is only a retention cutoff",
    ),
    "delete_text": (
        "    cutoff = (datetime.now() - timedelta(days=90)).strftime('%Y-%m-%d')\n"
        "    PostgresHook().run(f\"DELETE FROM audit_log WHERE logged_on < '{cutoff}'\")",
        "it is only a retention cutoff",
    ),
}


def _lint(tmp_path: Path, body: str) -> LintReport:
    return lint_files(tmp_path, {"dags/window.py": _DAG.format(body=body)})


@pytest.mark.parametrize("shape", sorted(_DEFECTS))
def test_a_window_reaching_data_stays_a_finding(tmp_path: Path, shape: str) -> None:
    report = _lint(tmp_path, _DEFECTS[shape])
    assert ("IDEM004", "window.py", _LINE, "work") in finding_rows(report)
    assert [f for f in report.information if f.rule == "IDEM004"] == []


@pytest.mark.parametrize("shape", sorted(_HARMLESS))
def test_a_window_reaching_no_data_is_information(tmp_path: Path, shape: str) -> None:
    body, reason = _HARMLESS[shape]
    report = _lint(tmp_path, body)
    assert [row for row in finding_rows(report) if row[0] == "IDEM004"] == []
    information = [f for f in report.information if f.rule == "IDEM004"]
    assert [(f.line, f.task_id) for f in information] == [(_LINE, "work")]
    assert reason in information[0].message
    assert "it would be one if the value reached a query's filter" in information[0].message


def test_a_window_reaching_no_data_makes_no_catchup_finding(tmp_path: Path) -> None:
    """A window that chooses no data makes no clock-read task for IDEM005: catchup over the DAG is
    still a finding, for repeating the same work, not for writing current data under old windows."""
    body, _reason = _HARMLESS["never_read"]
    text = _DAG.format(body=body).replace("catchup=False", "catchup=True")
    report = lint_files(tmp_path, {"dags/window.py": text})
    messages = [f.message for f in report.findings if f.rule == "IDEM005"]
    assert len(messages) == 1
    assert "read the clock or a window not the run's" not in messages[0]
    assert "no task takes the run's window" in messages[0]


_RETURNED = "    return (datetime.now() - timedelta(days=1)).isoformat()"
_PULLER = """
    BashOperator(task_id="load", bash_command="load --since {{ ti.xcom_pull('work') }}")
"""


def test_a_window_only_returned_as_an_xcom_no_task_pulls_is_information(tmp_path: Path) -> None:
    report = _lint(tmp_path, _RETURNED)
    assert [row for row in finding_rows(report) if row[0] == "IDEM004"] == []
    information = [f.message for f in report.information if f.rule == "IDEM004"]
    assert len(information) == 1
    assert "its value is only returned, an XCom no task pulls" in information[0]


def test_a_window_returned_as_an_xcom_a_task_pulls_stays_a_finding(tmp_path: Path) -> None:
    text = _DAG.format(body=_RETURNED) + _PULLER
    python = "from airflow.operators.python import PythonOperator"
    text = text.replace(python, f"from airflow.operators.bash import BashOperator\n{python}")
    report = lint_files(tmp_path, {"dags/window.py": text})
    assert ("IDEM004", "window.py", _LINE + 1, "work") in finding_rows(report)


_TASKFLOW = """\
from datetime import datetime, timedelta

from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
def window():
    @task
    def since():
        return (datetime.now() - timedelta(days=1)).isoformat()

    @task
    def load(start):
        print(start)

{calls}


window()
"""


@pytest.mark.parametrize(
    ("calls", "pulled"),
    [
        ("    since() >> load('2024-01-01')", False),
        ("    load(since())", True),
        ("    s = since()\n    load(s)", True),
    ],
)
def test_a_taskflow_window_is_information_only_when_its_output_is_not_taken(
    tmp_path: Path, calls: str, pulled: bool
) -> None:
    report = lint_files(tmp_path, {"dags/window.py": _TASKFLOW.format(calls=calls)})
    raised = [row for row in finding_rows(report) if row[0] == "IDEM004"]
    information = [f for f in report.information if f.rule == "IDEM004"]
    assert raised == ([("IDEM004", "window.py", 10, "since")] if pulled else [])
    assert len(information) == (0 if pulled else 1)

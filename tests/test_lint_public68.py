"""Round 36i of issue 35 (lint68, docs/lint-evaluation.md): IDEM003's harmless shapes (tuning split).

(a) A start_date that moves only at midnight (``days_ago(N)``, ``pendulum.today()``, ``today().add(
days=-N)``) with ``catchup=False`` is moot only when it lies at least one schedule period back: the
latest finished window then always starts on or after it. ``today()`` on a daily (or longer) schedule
is not: its first window ends at the next midnight, when the start has moved on, so the DAG never runs
on schedule (a finding, information before this round). ``datetime.today()`` is the time of day, as
``now()`` is, never a midnight start.

(b) A clock value whose only use is the text of a chat message sent by the repository's own helper
(``send_slack_message(f"ready at {now}")``): information, as a log line's already was. A helper whose
name says no chat service (``notify_customers``) stays a finding, and so does a clock value that
selects data.

Lines are counted by hand in the files below. On main 8e2ccbc 9 of these 12 tests fail (the unreadable
``days_ago`` count fails there on its message only: it was information for another reason); the three
that pass there are the negative cases (``test_clock_that_selects_data_stays``,
``test_non_chat_helper_stays`` and ``test_now_start_stays``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_idempotent.lint import LintReport
from tests.lintfiles import lint_files

_HEAD = """\
from datetime import datetime, timedelta

import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.utils.dates import days_ago

"""


def _start_dag(start: str, schedule: str) -> str:
    # line 8: the DAG and its start_date
    return _HEAD + (
        f'with DAG("d", schedule="{schedule}", start_date={start}, catchup=False) as dag:\n'
        '    BashOperator(task_id="t", bash_command="echo {{ ds }}")\n'
    )


def _idem003(report: LintReport) -> tuple[list[int], list[str]]:
    """Lines of IDEM003 findings, and the messages of IDEM003 information."""
    return (
        [f.line for f in report.findings if f.rule == "IDEM003"],
        [f.message for f in report.information if f.rule == "IDEM003"],
    )


@pytest.mark.parametrize(
    ("start", "schedule"),
    [
        ('pendulum.today("UTC")', "@daily"),
        ('pendulum.today("UTC")', "@weekly"),
        ("days_ago(1)", "@weekly"),
        ("datetime.today() - timedelta(days=1)", "@daily"),
    ],
)
def test_midnight_start_short_of_a_period_stays(tmp_path: Path, start: str, schedule: str) -> None:
    found, info = _idem003(lint_files(tmp_path, {"dags/d.py": _start_dag(start, schedule)}))
    assert found == [8]
    assert info == []


@pytest.mark.parametrize(
    ("start", "schedule", "days"),
    [
        ("days_ago(1)", "@daily", 1),
        ("days_ago(7)", "@weekly", 7),
        ('pendulum.today("UTC").add(days=-1)', "@daily", 1),
    ],
)
def test_midnight_start_a_period_back_is_information(
    tmp_path: Path, start: str, schedule: str, days: int
) -> None:
    found, info = _idem003(lint_files(tmp_path, {"dags/d.py": _start_dag(start, schedule)}))
    assert found == []
    assert len(info) == 1
    assert f"{days} day(s) back, at least one {schedule} period" in info[0]


def test_now_start_stays(tmp_path: Path) -> None:
    found, _ = _idem003(lint_files(tmp_path, {"dags/d.py": _start_dag("datetime.now()", "@daily")}))
    assert found == [8]


_CHAT = """\
from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook


def send_slack_message(text):
    print(text)


def notify_customers(text):
    PostgresHook().run("INSERT INTO outbox (body) VALUES (%s)", parameters=(text,))


def announce():
    ready = datetime.utcnow()
    send_slack_message(f"data is ready at {ready:%H:%M}")


def tell():
    sent = datetime.utcnow()
    notify_customers(sent)


def load():
    day = datetime.utcnow().strftime("%Y-%m-%d")
    PostgresHook().run(f"DELETE FROM t WHERE day = '{day}'")


with DAG("chat", schedule=None, start_date=datetime(2024, 1, 1)) as dag:
    PythonOperator(task_id="announce", python_callable=announce)
    PythonOperator(task_id="tell", python_callable=tell)
    PythonOperator(task_id="load", python_callable=load)
"""


def _rows(report: LintReport, task: str) -> tuple[list[int], list[str]]:
    return (
        [f.line for f in report.findings if f.rule == "IDEM003" and f.task_id == task],
        [f.message for f in report.information if f.rule == "IDEM003" and f.task_id == task],
    )


def test_clock_in_a_chat_message_is_information(tmp_path: Path) -> None:
    found, info = _rows(lint_files(tmp_path, {"dags/chat.py": _CHAT}), "announce")
    assert found == []
    assert len(info) == 1
    assert "the text of a chat message (send_slack_message())" in info[0]


def test_non_chat_helper_stays(tmp_path: Path) -> None:
    found, _ = _rows(lint_files(tmp_path, {"dags/chat.py": _CHAT}), "tell")
    assert found == [22]


def test_clock_that_selects_data_stays(tmp_path: Path) -> None:
    found, info = _rows(lint_files(tmp_path, {"dags/chat.py": _CHAT}), "load")
    assert found == [27]
    assert info == []


def test_days_ago_of_an_unreadable_count_is_one_day(tmp_path: Path) -> None:
    text = _HEAD + (
        "from airflow.models import Variable\n"
        'with DAG("d", start_date=days_ago(int(Variable.get("N", 3))), catchup=False) as dag:\n'
        '    BashOperator(task_id="t", bash_command="echo {{ ds }}")\n'
    )
    found, info = _idem003(lint_files(tmp_path, {"dags/d.py": text}))
    assert found == []
    assert len(info) == 1
    assert "1 day(s) back, at least one daily (no schedule=) period" in info[0]

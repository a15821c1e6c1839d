"""The linter's round-11 changes (issue 35, docs/lint-evaluation.md): each a principle stated once in
the module that owns it, tested here with a few hand-written lines. What each test asserts is what a
reviewer would say of the snippet, counted by hand (never read from the linter's tables):

- a chat notice (Slack/Teams/Telegram/Discord operators, a request to a chat service's webhook, or
  one the code names as a chat post) sent again by a retry is a second message in a channel, not a
  second effect: information, not an IDEM006 defect (notices); an e-mail, and an unkeyed POST to any
  other endpoint, even one whose path says "email" or "notification", stay findings;
- a span-shifted clock value that reaches only the text of a log call or of a call named for a
  notice (``send_notification(f"{yesterday}: ..")``) dates a message: no window (pyfacts).
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths
from tests.lintfiles import explained, seen


def _lint(tmp_path: Path, files: dict[str, str]) -> LintReport:
    (tmp_path / "dags").mkdir(parents=True)
    _ = [(tmp_path / "dags" / name).write_text(text) for name, text in files.items()]
    return lint_paths([tmp_path])


def _found(report: LintReport, rule: str) -> list[tuple[int, str | None]]:
    return sorted((f.line, f.task_id) for f in seen(report) if f.rule == rule)


def _info(report: LintReport, rule: str) -> list[tuple[int, str | None]]:
    return sorted((f.line, f.task_id) for f in explained(report) if f.rule == rule)


_NOTICES = """import json
from datetime import datetime
import requests
from airflow.decorators import dag, task
from airflow.operators.email import EmailOperator
from airflow.providers.slack.operators.slack_webhook import SlackWebhookOperator
from airflow.utils.email import send_email

CHAT = "https://chat.googleapis.com/v1/spaces/X/messages?key=k"


def post_to_slack(text):
    requests.post(HOOK_URL, data=json.dumps({"text": text}))


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 2})
def reports():
    @task
    def chat_summary(ds=None):
        requests.post(CHAT, json={"text": f"loaded {ds}"})

    @task
    def named_webhook(ds=None):
        chat_webhook_team = read_url()
        requests.post(chat_webhook_team, json={"text": ds})

    @task
    def helper_notice(ds=None):
        post_to_slack(f"done {ds}")

    @task
    def mail(ds=None):
        send_email(to="team@example.com", subject=ds, html_content="ok")

    @task
    def order(ds=None):
        requests.post("https://api.example.com/orders", json={"day": ds})

    @task
    def customer_statement(ds=None):
        requests.post("https://api.example.com/inner/statements/send/email", json={"day": ds})

    done = EmailOperator(task_id="done", to="team@example.com", subject="done", html_content="ok")
    slack = SlackWebhookOperator(task_id="slack", slack_webhook_conn_id="s", message="done")
    chat_summary() >> named_webhook() >> helper_notice() >> mail() >> order() >> customer_statement() >> done
    done >> slack


reports()
"""


def test_a_chat_notice_sent_again_is_information_and_other_sends_stay_findings(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"notices.py": _NOTICES})
    # by hand: the two e-mails (lines 33, 43), the order POST (line 37) and the statement POST to the
    # repository's API (line 41) stay findings; four chat posts (lines 13, 20, 25, 44) are information
    assert _found(report, "IDEM006") == [
        (33, "mail"),
        (37, "order"),
        (41, "customer_statement"),
        (43, "done"),
    ]
    assert _info(report, "IDEM006") == [
        (13, "helper_notice"),
        (20, "chat_summary"),
        (25, "named_webhook"),
        (44, "slack"),
    ]


_MESSAGE_DATE = """from datetime import date, datetime, timedelta
import requests
from airflow.decorators import dag, task

today = date.today()
yesterday = today - timedelta(days=1)


def send_notification(message):
    requests.post(HOOK, json={"text": message})


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
def report():
    @task
    def summary():
        count = count_rows()
        message = f"{yesterday}: {count} rows"
        send_notification(message)

    @task
    def dated_post():
        day = (datetime.now() - timedelta(days=1)).strftime("%Y-%m-%d")
        send_notification(f"report for {day}")

    @task
    def load():
        since = datetime.now() - timedelta(days=1)
        copy_rows(since)

    summary() >> dated_post() >> load()


report()
"""


def test_a_clock_value_that_only_dates_a_notice_is_no_window(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"message.py": _MESSAGE_DATE})
    # by hand: the module-level yesterday (line 5) and dated_post's day (line 23) only reach a
    # notification's text; load's since (line 28) is passed to a copy: the one relative window
    assert _found(report, "IDEM004") == [(28, "load")]
    assert _found(report, "IDEM003") == []

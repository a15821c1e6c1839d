"""The linter's round-12 changes (issue 35, docs/lint-evaluation.md): each a principle stated once in
the module that owns it, tested with a few hand-written lines. What each test asserts is what a
reviewer would say of the snippet, worked out by hand (never read from the linter's tables):

- a task whose only send is a chat notice answers "If this runs twice?" with what happens (a second
  copy of the message in the channel, no data changes), not "sends again .. key it first" (answers);
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths


def _lint(tmp_path: Path, files: dict[str, str]) -> LintReport:
    (tmp_path / "dags").mkdir(parents=True)
    _ = [(tmp_path / "dags" / name).write_text(text) for name, text in files.items()]
    return lint_paths([tmp_path])


def _found(report: LintReport, rule: str) -> list[tuple[int, str | None]]:
    return sorted((f.line, f.task_id) for f in report.findings if f.rule == rule)


def _info(report: LintReport, rule: str) -> list[tuple[int, str | None]]:
    return sorted((f.line, f.task_id) for f in report.information if f.rule == rule)


_CHAT = """from datetime import datetime
import requests
from airflow.decorators import dag, task
from airflow.providers.slack.operators.slack_webhook import SlackWebhookOperator

CHAT = "https://chat.googleapis.com/v1/spaces/X/messages?key=k"


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 2})
def reports():
    @task
    def chat_summary(ds=None):
        requests.post(CHAT, json={"text": f"loaded {ds}"})

    SlackWebhookOperator(task_id="ping", slack_webhook_conn_id="s", message="done")

    @task
    def order(ds=None):
        requests.post("https://api.example.com/orders", json={"day": ds})

    chat_summary()
    order()


reports()
"""


def test_a_chat_notice_answers_what_a_second_run_does(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"chat.py": _CHAT})
    answers = {t.task_id: t for t in report.tasks}
    # the two notices are information (round 11), the order POST a finding
    assert _info(report, "IDEM006") == [(13, "chat_summary"), (15, "ping")]
    assert _found(report, "IDEM006") == [(19, "order")]
    for task_id in ("chat_summary", "ping"):
        said = answers[task_id].runs_twice
        assert said.startswith("Posts the message again:"), said
        assert "second copy" in said and "key it" not in said and "Sends again" not in said
        backfill = answers[task_id].backfill
        assert "one chat message of its own" in backfill and "key" not in backfill, backfill
    assert answers["order"].runs_twice.startswith("Sends again: an HTTP POST")
    assert answers["order"].backfill.endswith("again; key it first.")

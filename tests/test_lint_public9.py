"""The linter's round-9 changes (issue 35, docs/lint-evaluation.md): each a principle stated once in
the module that owns it, tested here with a few hand-written lines. What each test asserts is what a
reviewer would say of the snippet, counted by hand (never read from the linter's tables):

- a task made by a custom operator of the repository (a class deriving, directly or through the
  repository's own classes, from an Airflow operator) runs that class's ``execute``: its body, and
  the methods it calls on ``self`` (its own or a base's), are the task's code (collect);
- a clock read, or the clock shifted by a span, whose value only decides when the task acts is no
  data: a ``sleep(..)``'s jitter, a polling deadline read only in the ``while`` loop's condition
  (pyfacts).
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths


def _lint(tmp_path: Path, files: dict[str, str]) -> LintReport:
    (tmp_path / "dags").mkdir()
    _ = [(tmp_path / "dags" / name).write_text(text) for name, text in files.items()]
    return lint_paths([tmp_path])


def _found(items: list, rule: str) -> list[tuple[str, int, str | None]]:  # type: ignore[type-arg]
    return sorted((Path(f.file).name, f.line, f.task_id) for f in items if f.rule == rule)


_OPERATORS = """import requests
from airflow.models import BaseOperator


class LoadBase(BaseOperator):
    def upload(self, df):
        df.to_sql("rollup", con=None, if_exists="append")


class RollupOperator(LoadBase):
    def __init__(self, query, **kwargs):
        super().__init__(**kwargs)
        self.query = query

    def execute(self, context):
        df = self.fetch()
        self.upload(df)

    def fetch(self):
        return None


class NotifyOperator(BaseOperator):
    def execute(self, context):
        requests.post("https://hooks.example.com/notify", json={"text": "done"})


class Plain:
    def execute(self, context):
        requests.post("https://hooks.example.com/notify", json={"text": "done"})
"""

_DAG = """from datetime import datetime
from airflow import DAG
from ops import NotifyOperator, Plain, RollupOperator

with DAG("rollups", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False,
         default_args={"retries": 2}):
    RollupOperator(task_id="rollup", query="SELECT 1")
    NotifyOperator(task_id="notify")
    Plain(task_id="plain")
"""


def test_a_custom_operators_execute_is_its_tasks_code(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"ops.py": _OPERATORS, "rollups.py": _DAG})
    # the append is written in the base class's upload(), called from execute through self: line 7
    assert _found(report.findings, "IDEM002") == [("ops.py", 7, "rollup")]
    # the POST in NotifyOperator.execute (line 25), retried twice with no key; Plain is no operator
    assert _found(report.findings, "IDEM006") == [("ops.py", 25, "notify")]


def test_an_installed_operator_and_a_callable_are_read_as_before(tmp_path: Path) -> None:
    dag = """from datetime import datetime
import requests
from airflow import DAG
from airflow.providers.http.operators.http import HttpOperator
from airflow.operators.python import PythonOperator


def send():
    requests.post("https://hooks.example.com/notify", json={"text": "done"})


with DAG("calls", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False,
         default_args={"retries": 1}):
    HttpOperator(task_id="http_get", http_conn_id="api", endpoint="/status", method="GET")
    PythonOperator(task_id="send", python_callable=send)
"""
    report = _lint(tmp_path, {"calls.py": dag})
    assert _found(report.findings, "IDEM006") == [("calls.py", 9, "send")]


def test_clock_reads_that_only_decide_when_the_task_acts_are_no_finding(tmp_path: Path) -> None:
    dag = """import random
import time
from datetime import datetime, timedelta
from airflow import DAG
from airflow.decorators import task


@task
def jitter():
    time.sleep(random.randint(1, 10))
    return 1


@task
def poll(hook=None):
    start = datetime.now()
    end = start + timedelta(minutes=30)
    while datetime.now() < end:
        if hook.ready("s3://bucket/{{ ds }}/"):
            return
        time.sleep(60)
    raise TimeoutError("not ready")


@task
def load(hook=None):
    since = datetime.now() - timedelta(days=1)
    hook.run(f"INSERT INTO t SELECT * FROM s WHERE ts >= '{since}'")


with DAG("waits", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    jitter()
    poll()
    load()
"""
    report = _lint(tmp_path, {"waits.py": dag})
    clock = [*_found(report.findings, "IDEM003"), *_found(report.findings, "IDEM004")]
    # only load's window (line 27: yesterday from the clock) is data; the sleep and the deadline are not
    assert clock == [("waits.py", 27, "load")]

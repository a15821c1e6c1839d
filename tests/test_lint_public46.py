"""IDEM003's severity (issue 35, lint46, docs/lint-evaluation.md): a plain clock read is a finding
only where its value reaches what a rerun reads or writes (a bound, a branch, an argument of a request
or operator, a date/path/key name, a mark); where every use of the value only stamps a record
(``result_time``, ``harvested_at``, ``updated_at``) it is information that says why the rerun is safe.
Across the labelled rounds 11-31 and the tuning half such stamps were labelled harmless every time,
and the useful shapes below (each from a labelled useful finding) stay findings.
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import finding_rows, lint_files

_HEAD = """\
from datetime import datetime, timezone

import requests
from airflow.models import Variable
from airflow.sdk import DAG, Param, task
from airflow.providers.http.operators.http import HttpOperator

with DAG("feed", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False{params}):
"""

#: the clock's line in each body, counted by hand: the first line of a body is _HEAD's line 9
_STAMP_DICT = """\
    @task
    def publish():
        reading = requests.get("https://sensors/api/current").json()
        observation = {"result_time": datetime.now(timezone.utc), "value": reading["value"]}
        requests.put("https://sta/api/observations/" + reading["id"], json=observation)

    publish()
"""

_STAMP_NAME = """\
    @task
    def harvest():
        harvested_at = datetime.now(timezone.utc)
        for doc in requests.get("https://api/works").json():
            upsert_work(doc["doi"], doc, harvested_at=harvested_at)

    harvest()


def upsert_work(doi, doc, harvested_at):
    requests.put("https://store/works/" + doi, json={**doc, "harvested_at": harvested_at.isoformat()})
"""

_BOUND = """\
    @task
    def load_files():
        for name in requests.get("https://bucket/list").json():
            day = datetime.strptime(name.split("-")[2], "%Y%m%d").date()
            if day <= datetime.now().date():
                requests.post("https://warehouse/load", json={"file": name})

    load_files()
"""

_ENDPOINT = """\
    HttpOperator(
        task_id="sync_statement",
        http_conn_id="ledger",
        endpoint="/statement/sync?date={date}".format(date=datetime.now().strftime("%Y%m%d")),
        method="POST",
    )
"""

_MARK = """\
    @task
    def alert():
        since = Variable.get("last_alert_ts")
        Variable.set("last_alert_ts", datetime.now().isoformat())
        for comment in requests.get("https://forum/api/pending", params={"since": since}).json():
            requests.post("https://chat/api/send", json={"text": comment["body"]})

    alert()
"""

_PARAM = ', params={"current_date": Param(datetime.now().strftime("%Y-%m-%d"), type="string")}'
_PARAM_BODY = """\
    @task
    def report(params=None):
        end = params["current_date"]
        rows = requests.get("https://warehouse/api/created", params={"until": end}).json()
        requests.post("https://sheet/api/rows", json=rows)

    report()
"""


def _idem003(tmp_path: Path, body: str, params: str = "") -> tuple[list[int], list[int]]:
    report = lint_files(tmp_path, {"dags/feed.py": _HEAD.format(params=params) + body})
    findings = [line for rule, _file, line, _task in finding_rows(report) if rule == "IDEM003"]
    information = [f.line for f in report.information if f.rule == "IDEM003"]
    return findings, information


def test_a_clock_value_that_only_fills_a_stamp_field_is_information(tmp_path: Path) -> None:
    findings, information = _idem003(tmp_path, _STAMP_DICT)
    assert findings == []
    assert information == [12]


def test_a_clock_value_kept_in_a_stamp_name_and_passed_as_that_stamp_is_information(tmp_path: Path) -> None:
    findings, information = _idem003(tmp_path, _STAMP_NAME)
    assert findings == []
    assert information == [11]


def test_the_information_says_why_a_rerun_is_safe(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/feed.py": _HEAD.format(params="") + _STAMP_DICT})
    (entry,) = [f for f in report.information if f.rule == "IDEM003"]
    assert "result_time" in entry.message and "same data" in entry.message


def test_a_clock_bound_on_the_files_loaded_stays_a_finding(tmp_path: Path) -> None:
    assert _idem003(tmp_path, _BOUND)[0] == [13]


def test_a_clock_date_sent_in_an_endpoint_stays_a_finding(tmp_path: Path) -> None:
    assert _idem003(tmp_path, _ENDPOINT)[0] == [12]


def test_a_clock_mark_saved_in_a_variable_is_not_made_information(tmp_path: Path) -> None:
    """The mark is reported as the watermark window it starts (IDEM004, line 11), never demoted."""
    report = lint_files(tmp_path, {"dags/feed.py": _HEAD.format(params="") + _MARK})
    assert [(rule, line) for rule, _file, line, _task in finding_rows(report)] == [("IDEM004", 11)]
    assert [f.line for f in report.information if f.rule == "IDEM003"] == []


def test_a_clock_params_default_of_a_scheduled_dag_stays_a_finding(tmp_path: Path) -> None:
    assert _idem003(tmp_path, _PARAM_BODY, _PARAM)[0] == [8]

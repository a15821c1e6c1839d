"""Round 34c of issue 35 (lint50, docs/lint-evaluation.md): the general shapes behind round 34's
harmless and false findings.

- IDEM003: a clock value that only names a log folder (``LOG_PATH`` handed to ``cluster_log_conf``,
  ``log_uri=``) is a log stamp, and ``END_DATE=now()`` beside ``START_DATE=now() - N days`` is the end
  of that relative window (one cause, IDEM004): information;
- IDEM001/IDEM004: a clock-filtered SELECT whose rows are only printed or logged is no window;
- IDEM002: rows filtered by membership in a SELECT of the target's keys are an anti-join insert, and
  an INSERT run only when a SELECT of the same table found nothing is a get-or-create;
- IDEM002: an unqualified table in a SQL file is the one deleted under its schema just before (held
  already on main since round 33b's ``facts.same_table``: a guard here).

Each shape has a counter-shape that must stay a finding. Lines are counted by hand: the first line of
a body is _HEAD's line 10.
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import finding_rows, lint_files

_HEAD = """\
from datetime import datetime, timedelta

import requests
from airflow.models import Variable
from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import DAG, task

with DAG("feed", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
"""

_LOG_FOLDER = """\
    LOG_PATH = {"dbfs": {"destination": "dbfs:/logs/feed/%s" % datetime.date(datetime.now())}}
    cluster = {"spark_version": "7.3", "num_workers": 2, "cluster_log_conf": LOG_PATH}
    DatabricksSubmitRunOperator(task_id="job", new_cluster=cluster, spark_jar_task={"main_class_name": "J"})
"""

#: the counter-shape: the same dated folder is where the job's input is read from
_INPUT_FOLDER = """\
    INPUT_PATH = "dbfs:/landing/feed/%s" % datetime.date(datetime.now())
    DatabricksSubmitRunOperator(task_id="job", spark_jar_task={"parameters": [INPUT_PATH]})
"""

#: the counter-shape: the day of a log record the job writes is data, though its name says log
_LOG_DATE = """\
    log_date = datetime.now().date()
    DatabricksSubmitRunOperator(task_id="job", spark_jar_task={"parameters": {"log_date": log_date}})
"""

_WINDOW_END = """\
    DatabricksSubmitRunOperator(
        task_id="job",
        spark_jar_task={
            "main_class_name": "J",
            "parameters": [
                "START_DATE=" + (datetime.now() - timedelta(days=7)).strftime("%Y-%m-%d"),
                "END_DATE=" + datetime.now().strftime("%Y-%m-%d"),
            ],
        },
    )
"""

#: the counter-shape: a run day handed to the job with no relative window beside it
_RUN_DAY = """\
    DatabricksSubmitRunOperator(
        task_id="job",
        spark_jar_task={"parameters": ["RUN_DATE=" + datetime.now().strftime("%Y-%m-%d")]},
    )
"""

_PRINTED_COUNT = """\
    @task
    def fetch():
        hook = PostgresHook(postgres_conn_id="pg")
        for item in requests.get("https://api/news").json():
            hook.run("INSERT INTO news (id) VALUES (%s) ON CONFLICT (id) DO NOTHING", parameters=[item["id"]])
        today = hook.get_first("SELECT COUNT(*) FROM news WHERE fetched_at >= CURRENT_DATE")
        count = today[0] if today else 0
        print(f"added today: {count}")
        recent = hook.get_records("SELECT id, title FROM news WHERE fetched_at >= NOW() - INTERVAL '1 day'")
        if recent:
            for news_id, title in recent:
                print(f"{news_id}: {title}")

    fetch()
"""

_STAMP_COUNTED = """\
    @task
    def fetch():
        hook = PostgresHook(postgres_conn_id="pg")
        for item in requests.get("https://api/news").json():
            hook.run(
                "INSERT INTO news (id, title) VALUES (%s, %s) "
                "ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, fetched_at = NOW()",
                parameters=[item["id"], item["title"]],
            )
        today = hook.get_first("SELECT COUNT(*) FROM news WHERE fetched_at >= CURRENT_DATE")
        print(f"added today: {today[0]}")

    fetch()
"""

#: the counter-shape: the clock-filtered rows are copied into another table
_COPIED_ROWS = """\
    @task
    def copy():
        hook = PostgresHook(postgres_conn_id="pg")
        rows = hook.get_records("SELECT id, title FROM news WHERE fetched_at >= NOW() - INTERVAL '1 day'")
        hook.insert_rows("news_digest", rows)

    copy()
"""

_MEMBERSHIP = """\
    @task
    def messages():
        hook = PostgresHook(postgres_conn_id="pg")
        fetched = requests.get("https://mail/api/messages").json()
        ids = ", ".join(f"'{m['id']}'" for m in fetched)
        exist_ids = hook.get_pandas_df(f"select id from mail.messages where id in ({ids})")["id"].tolist()
        rows = []
        for m in fetched:
            if m["id"] in exist_ids:
                continue
            rows.append((m["id"], m["subject"]))
        hook.insert_rows(table="mail.messages", rows=rows)

    messages()
"""

#: the counter-shape: the ids tested are another table's (a rerun still appends the messages)
_OTHER_KEYS = _MEMBERSHIP.replace("select id from mail.messages", "select id from mail.blocked")

_GET_OR_CREATE = """\
    @task
    def progress():
        hook = PostgresHook(postgres_conn_id="pg")
        row = hook.get_first("SELECT position FROM progress WHERE name = 'sp500' AND status = 'active'")
        if not row:
            hook.run("INSERT INTO progress (name, position) VALUES ('sp500', 0)")
            position = 0
        else:
            position = row[0]
        print(position)

    progress()
"""

#: the counter-shape: the lookup reads another table than the insert's
_OTHER_LOOKUP = _GET_OR_CREATE.replace("SELECT position FROM progress", "SELECT position FROM sessions")

_SQL_DAG = """\
from datetime import datetime

from airflow.providers.mysql.operators.mysql import MySqlOperator
from airflow.sdk import DAG

with DAG("adjust", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    MySqlOperator(task_id="load", mysql_conn_id="db", sql="sql/load.sql")
"""
_SQL_SAME = """\
delete from shop.adjustments;

INSERT INTO adjustments
SELECT ref, SUM(amount) FROM shop.sales GROUP BY ref;
"""
#: the counter-shape: the delete is of another schema's table of that name
_SQL_OTHER = _SQL_SAME.replace("INSERT INTO adjustments", "INSERT INTO archive.adjustments")


def _lint(tmp_path: Path, body: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    report = lint_files(tmp_path, {"dags/feed.py": _HEAD + body})
    findings = [(rule, line) for rule, _file, line, _task in finding_rows(report)]
    information = sorted((f.rule, f.line) for f in report.information)
    return findings, information


def test_a_clock_value_that_only_names_a_cluster_log_folder_is_information(tmp_path: Path) -> None:
    findings, information = _lint(tmp_path, _LOG_FOLDER)
    assert ("IDEM003", 10) not in findings
    assert ("IDEM003", 10) in information


def test_a_clock_value_that_names_the_input_folder_stays_a_finding(tmp_path: Path) -> None:
    findings, _ = _lint(tmp_path, _INPUT_FOLDER)
    assert ("IDEM003", 10) in findings


def test_the_day_of_a_log_record_stays_a_finding(tmp_path: Path) -> None:
    findings, _ = _lint(tmp_path, _LOG_DATE)
    assert ("IDEM003", 10) in findings


def test_the_end_of_a_relative_window_is_the_window_not_a_second_cause(tmp_path: Path) -> None:
    findings, information = _lint(tmp_path, _WINDOW_END)
    assert findings == [("IDEM004", 15)]
    assert ("IDEM003", 16) in information


def test_a_run_day_handed_to_a_job_stays_a_finding(tmp_path: Path) -> None:
    findings, _ = _lint(tmp_path, _RUN_DAY)
    assert findings == [("IDEM003", 12)]


def test_a_clock_filtered_count_that_is_only_printed_is_no_window(tmp_path: Path) -> None:
    findings, information = _lint(tmp_path, _PRINTED_COUNT)
    assert [f for f in findings if f[0] in ("IDEM001", "IDEM004")] == []
    assert ("IDEM001", 15) in information and ("IDEM004", 18) in information


def test_a_stamp_read_back_only_by_a_printed_count_is_a_stamp(tmp_path: Path) -> None:
    """``fetched_at = NOW()`` is a stamp unless a query selects by it: a printed count does not."""
    findings, information = _lint(tmp_path, _STAMP_COUNTED)
    assert [f for f in findings if f[0] == "IDEM001"] == []
    assert ("IDEM001", 16) in information and ("IDEM001", 19) in information


def test_clock_filtered_rows_copied_into_a_table_stay_a_window(tmp_path: Path) -> None:
    findings, _ = _lint(tmp_path, _COPIED_ROWS)
    assert ("IDEM004", 13) in findings


def test_rows_filtered_by_the_target_keys_already_there_are_an_anti_join(tmp_path: Path) -> None:
    findings, information = _lint(tmp_path, _MEMBERSHIP)
    assert [f for f in findings if f[0] == "IDEM002"] == []
    assert ("IDEM002", 21) in information


def test_rows_filtered_by_another_table_keys_stay_an_append(tmp_path: Path) -> None:
    findings, _ = _lint(tmp_path, _OTHER_KEYS)
    assert ("IDEM002", 21) in findings


def test_an_insert_run_only_when_a_select_of_its_table_found_nothing_is_a_get_or_create(
    tmp_path: Path,
) -> None:
    findings, information = _lint(tmp_path, _GET_OR_CREATE)
    assert [f for f in findings if f[0] == "IDEM002"] == []
    assert ("IDEM002", 15) in information


def test_an_insert_guarded_by_another_table_lookup_stays_an_append(tmp_path: Path) -> None:
    findings, _ = _lint(tmp_path, _OTHER_LOOKUP)
    assert ("IDEM002", 15) in findings


def test_an_unqualified_insert_after_a_schema_qualified_delete_is_a_replace(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/adjust.py": _SQL_DAG, "dags/sql/load.sql": _SQL_SAME})
    assert [r for r in finding_rows(report) if r[0] == "IDEM002"] == []


def test_an_insert_into_another_schema_after_the_delete_stays_an_append(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/adjust.py": _SQL_DAG, "dags/sql/load.sql": _SQL_OTHER})
    assert [r[:3] for r in finding_rows(report) if r[0] == "IDEM002"] == [("IDEM002", "load.sql", 3)]


_METAS = """\
from dataclasses import dataclass


@dataclass
class Meta:
    report_id: str
    table: str


metas = [Meta(report_id="110", table="visa_110"), Meta(report_id="120", table="visa_120")]
"""

_GROUP_DAG = """\
from datetime import datetime

from airflow.decorators import task_group
from airflow.providers.postgres.operators.postgres import PostgresOperator
from airflow.sdk import DAG

from common.metas import metas

with DAG("reports", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):

    @task_group()
    def load():
        for meta in metas:
            PostgresOperator(task_id=meta.table, sql=f"INSERT INTO {meta.table} SELECT * FROM staging")

    load()
"""


def test_tasks_a_task_group_makes_in_a_loop_over_imported_records_are_named_by_their_fields(
    tmp_path: Path,
) -> None:
    report = lint_files(
        tmp_path,
        {"dags/reports.py": _GROUP_DAG, "dags/common/__init__.py": "", "dags/common/metas.py": _METAS},
    )
    assert [(r[0], r[2], r[3]) for r in finding_rows(report)] == [
        ("IDEM002", 14, "load.visa_110"),
        ("IDEM002", 14, "load.visa_120"),
    ]

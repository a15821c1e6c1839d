"""The linter's round-13 changes (issue 35, docs/lint-evaluation.md): true-but-harmless shapes of the
tuning half listed as information, each a principle stated once in the module that owns it, tested
with a few hand-written lines. What each test asserts is what a reviewer would say of the snippet,
worked out by hand (never read from the linter's tables):

- a request that cancels or stops a job, rebuilds or clears a cache, or refreshes or syncs state
  (its path says so, and names no send) is information, with "If this runs twice?" answered (reads);
  an order, a refresh that e-mails, and a path whose cache segment is further up stay sends;
- an audit column written through ``AT TIME ZONE`` or a CAST is still an audit column (benign);
- a clock read in an ``except`` handler that raises again, whose value stays in the handler, stamps
  the failed attempt's error record; one whose every use is an argument of a log-writing call stamps
  the job's own log; one in a function named for archiving names a backup copy (records). A
  fallback value that leaves its handler, a log *read* (``fetch_logs(since=..)``) and the same copy
  code in an export stay findings.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, RuleFinding, lint_paths
from tests.lintfiles import explained, seen


def _lint(tmp_path: Path, name: str, text: str) -> LintReport:
    """Lint one DAG file written into an empty project folder."""
    (tmp_path / name).write_text(text)
    return lint_paths([tmp_path])


def _at(entries: list[RuleFinding], rule: str) -> list[tuple[int, str | None]]:
    return sorted((f.line, f.task_id) for f in entries if f.rule == rule)  # findings or information


_RECORDS = """from datetime import datetime
from airflow.decorators import dag, task
from airflow.providers.postgres.hooks.postgres import PostgresHook


def write_to_execution_logs(hook, name, status, start, message):
    hook.run("INSERT INTO etl.execution_log VALUES (%s, %s, %s, %s)", (name, status, start, message))


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 2})
def loads():
    @task
    def load(ds=None):
        hook = PostgresHook("wh")
        try:
            hook.run("DELETE FROM t WHERE d = %s; INSERT INTO t SELECT * FROM st WHERE d = %s", (ds, ds))
        except Exception as e:
            failed_at = datetime.utcnow()
            write_to_execution_logs(hook, "load", "ERROR", failed_at, str(e))
            raise

    @task
    def started(ds=None):
        log_run_start(job="started", at=datetime.now().isoformat())

    @task
    def archive_configs():
        stamp = datetime.utcnow().strftime("%Y%m%dT%H%M%S")
        copy_prefix("s3://b/configs/", f"s3://b/configs-archive/{stamp}/")

    @task
    def export_configs():
        stamp = datetime.utcnow().strftime("%Y%m%dT%H%M%S")
        copy_prefix("s3://b/configs/", f"s3://b/configs-export/{stamp}/")

    @task
    def fallback(ds=None):
        hook = PostgresHook("wh")
        try:
            day = ask_api_for_day()
        except KeyError:
            day = datetime.now().date()
            raise
        hook.run("INSERT INTO t SELECT * FROM s WHERE day = %s", parameters=(day,))

    @task
    def kept(ds=None):
        try:
            ask_api_for_day()
        except KeyError:
            failed_at = datetime.now()
            return failed_at

    @task
    def fetch(ds=None):
        hook = PostgresHook("wh")
        rows = fetch_logs(since=datetime.now())
        hook.insert_rows("logs", rows)

    @task
    def catalog(ds=None):
        insert_catalog(item="a", added=datetime.now())

    load(), started(), archive_configs(), export_configs(), fallback(), kept(), fetch(), catalog()


loads()
"""


def test_own_records_are_information_and_data_stays_a_finding(tmp_path: Path) -> None:
    report = _lint(tmp_path, "records.py", _RECORDS)
    # line 18: the failed attempt's error record, in a handler that raises again;
    # line 24: every use is an argument of log_run_start (a log write);
    # line 28: a function named for archiving names the copy by its time
    assert _at(explained(report), "IDEM003") == [(18, "load"), (24, "started"), (28, "archive_configs")]
    # the same copy in an export (33); a handler's value that leaves it (42: it is read after the
    # try, whatever the handler ends with); a handler that returns the value (51); a log read by time
    # (57); a call whose name only ends in "log" letters (62: insert_catalog)
    assert _at(seen(report), "IDEM003") == [
        (33, "export_configs"),
        (42, "fallback"),
        (51, "kept"),
        (57, "fetch"),
        (62, "catalog"),
    ]
    said = {f.task_id: f.message for f in explained(report) if f.rule == "IDEM003"}
    assert "failed attempt's error record" in said["load"]
    assert "job's own log" in said["started"]
    assert "backup copy" in said["archive_configs"]
    assert all("if this runs twice" in text for text in said.values()), said


def _line(text: str, needle: str) -> int:
    """The 1-based line of `text` that holds `needle` (once)."""
    hits = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


_STAMPS = """from datetime import datetime
from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG("stamps", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    SQLExecuteQueryOperator(task_id="zoned", conn_id="wh", sql=\"\"\"
        UPDATE jira.issue j SET updated_at = now() AT TIME ZONE 'utc', status = s.status
        FROM stg.issue s WHERE s.id = j.id\"\"\")
    SQLExecuteQueryOperator(task_id="cast", conn_id="wh", sql=\"\"\"
        UPDATE jobs SET status = 'done', processed_at = CAST(now() AS timestamp) WHERE id = 7\"\"\")
    SQLExecuteQueryOperator(task_id="loaded", conn_id="wh", sql=\"\"\"
        UPDATE balances SET loaded_at = now() AT TIME ZONE 'utc' WHERE day = '{{ ds }}'\"\"\")
    SQLExecuteQueryOperator(task_id="plain", conn_id="wh", sql=\"\"\"
        INSERT INTO loads (id, loaded_at) SELECT id, now() FROM src\"\"\")
"""


def test_an_audit_column_is_seen_through_a_time_zone_or_cast(tmp_path: Path) -> None:
    report = _lint(tmp_path, "stamps.py", _STAMPS)
    at = {
        task: _line(_STAMPS, needle)
        for task, needle in [
            ("zoned", "updated_at = now() AT TIME ZONE"),
            ("cast", "processed_at = CAST"),
            ("loaded", "SET loaded_at"),
            ("plain", "INSERT INTO loads"),
        ]
    }
    # updated_at / processed_at (audit columns, `benign.AUDIT_COLUMN`) written through AT TIME ZONE or a CAST:
    # information, as the bare now() always was; since round 14 (`stamps`) so is loaded_at on the rows an
    # UPDATE rewrites (nothing here selects by it), while loaded_at on appended rows stays a finding
    assert _at(explained(report), "IDEM001") == sorted((at[t], t) for t in ("zoned", "cast", "loaded"))
    assert _at(seen(report), "IDEM001") == [(at["plain"], "plain")]


_REQUESTS = """from datetime import datetime
import requests
from airflow.decorators import dag, task
from airflow.providers.http.operators.http import SimpleHttpOperator

DRUID = "http://druid:8081/druid/indexer/v1/task"


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 2})
def jobs():
    @task
    def stop_slow(task_id: str):
        requests.post(f"{DRUID}/{task_id}/cancel")

    @task
    def warm():
        requests.put("http://superset:8088/api/v1/chart/warm_up_cache", json={"chart_id": 7})

    SimpleHttpOperator(task_id="reload", method="POST", http_conn_id="w", endpoint="inner/chart/cache/1week")
    SimpleHttpOperator(task_id="sync_files", method="PATCH", http_conn_id="w", endpoint="/in/ftpFiles/sync")
    SimpleHttpOperator(task_id="refresh_symbols", http_conn_id="w", endpoint="/report/inner/refreshSymbols")
    SimpleHttpOperator(task_id="mail", method="PUT", http_conn_id="w", endpoint="/refresh/send/email")

    @task
    def order(ds=None):
        requests.post("https://api.example.com/orders", json={"day": ds})

    SimpleHttpOperator(task_id="cached_orders", method="POST", http_conn_id="w", endpoint="cache/bill/create")

    stop_slow("t1"), warm(), order()


jobs()
"""


def test_ending_a_job_or_refreshing_a_cache_or_state_is_sent_again_harmlessly(tmp_path: Path) -> None:
    report = _lint(tmp_path, "jobs.py", _REQUESTS)
    line = {
        needle: _line(_REQUESTS, needle)
        for needle in (
            "/cancel",
            "warm_up_cache",
            '"reload"',
            "ftpFiles",
            "refreshSymbols",
            "com/orders",
            "cached",
            "send/email",
        )
    }
    assert _at(explained(report), "IDEM006") == [
        (line["/cancel"], "stop_slow"),
        (line["warm_up_cache"], "warm"),
        (line['"reload"'], "reload"),
        (line["ftpFiles"], "sync_files"),
        (line["refreshSymbols"], "refresh_symbols"),
    ]
    # an order, a refresh that sends e-mail, and an endpoint whose cache segment is not among its
    # last two: still sends
    assert _at(seen(report), "IDEM006") == sorted(
        [(line["com/orders"], "order"), (line["cached"], "cached_orders"), (line["send/email"], "mail")]
    )
    answers = {t.task_id: t.runs_twice for t in report.tasks}
    assert answers["stop_slow"].startswith("Nothing:") and "job already ended" in answers["stop_slow"]
    assert answers["reload"].startswith("Nothing:") and "same cache" in answers["reload"]
    assert answers["sync_files"].startswith("Nothing:") and "finds them matching" in answers["sync_files"]
    assert answers["order"].startswith("Sends again:")

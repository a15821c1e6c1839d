"""The linter's round-14 changes (issue 35, docs/lint-evaluation.md), each tested with a few
hand-written lines; what each test asserts is what a reviewer would say of the snippet, worked out
by hand (never read from the linter's tables):

- the clock written into a stamp column (`stamps`): on rows the task rewrites by window or key, a
  rerun re-stamps the same rows: information; the same stamp read as a mark by some SQL of the
  repository (compared by order, or its MAX), or a load stamp on appended rows, stays IDEM001; an
  audit column read as a mark becomes IDEM001; a mark on *another* table's column of the same name
  changes nothing.
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


def _dag(*tasks: tuple[str, str]) -> str:
    ops = "".join(
        f"    SQLExecuteQueryOperator(task_id={task!r}, conn_id='wh', sql={sql!r})\n" for task, sql in tasks
    )
    return (
        "from datetime import datetime\n"
        "from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator\n"
        "from airflow.sdk import DAG\n"
        "with DAG('stamps', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n" + ops
    )


_SNAPSHOT = (
    "snapshot",
    "DELETE FROM fin.snap WHERE day = '{{ ds }}'; "
    "INSERT INTO fin.snap (day, account, balance, loaded_at) "
    "SELECT '{{ ds }}', account, balance, now() FROM fin.acc",
)


def test_load_stamp_on_rows_rewritten_by_window_is_information(tmp_path: Path) -> None:
    # the corpus's ddl05 shape: the window is deleted and inserted again in one task, nothing reads
    # loaded_at: a rerun re-stamps the same rows (line 5 holds the first task)
    report = _lint(tmp_path, "snap.py", _dag(_SNAPSHOT))
    assert _at(report.findings, "IDEM001") == []
    assert _at(explained(report), "IDEM001") == [(5, "snapshot")]
    assert "a rerun re-stamps these rows" in explained(report)[0].message


def test_load_stamp_another_task_selects_by_is_a_defect(tmp_path: Path) -> None:
    feed = (
        "feed",
        "DELETE FROM fin.feed WHERE day = '{{ ds }}'; INSERT INTO fin.feed SELECT account, balance "
        "FROM fin.snap WHERE loaded_at >= '{{ data_interval_start }}' "
        "AND loaded_at < '{{ data_interval_end }}'",
    )
    report = _lint(tmp_path, "feed.py", _dag(_SNAPSHOT, feed))
    assert _at(seen(report), "IDEM001") == [(5, "snapshot")]
    message = next(f.message for f in seen(report) if f.rule == "IDEM001")
    assert "fin.snap.loaded_at is read as a mark" in message


def test_upserted_created_at_is_information_and_appended_one_is_not(tmp_path: Path) -> None:
    upsert = (
        "upsert",
        "INSERT INTO dim (id, name, created_at) SELECT id, name, now() FROM src "
        "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, created_at = EXCLUDED.created_at",
    )
    append = ("append", "INSERT INTO events (id, created_at) SELECT id, now() FROM src")
    report = _lint(tmp_path, "dims.py", _dag(upsert, append))
    assert _at(seen(report), "IDEM001") == [(6, "append")]
    assert _at(explained(report), "IDEM001") == [(5, "upsert")]


def test_audit_column_read_as_a_mark_is_a_defect_but_not_another_tables(tmp_path: Path) -> None:
    mark = ("mark", "UPDATE orders SET status = 'done', updated_at = now() WHERE day = '{{ ds }}'")
    delta = ("delta", "SELECT id FROM orders WHERE updated_at > '{{ prev_ds }}'")
    report = _lint(tmp_path, "orders.py", _dag(mark, delta))
    assert _at(seen(report), "IDEM001") == [(5, "mark")]
    # the same column name compared on a source table of another name: the audit stamp stays harmless
    other = ("extract", "SELECT id FROM crm.accounts WHERE updated_at > '{{ prev_ds }}'")
    (tmp_path / "other").mkdir()
    report = _lint(tmp_path / "other", "o.py", _dag(mark, other))
    assert _at(seen(report), "IDEM001") == []
    assert _at(explained(report), "IDEM001") == [(5, "mark")]


_STREAMING = """from datetime import datetime
from airflow.decorators import dag, task
from google.cloud import bigquery


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 1})
def manifests():
    @task
    def stream_rows(rows):
        client = bigquery.Client()
        errors = client.insert_rows_json("proj.logs.manifest_stg", rows)
        assert not errors

    @task
    def stream_frame(frame):
        bigquery.Client().insert_rows_from_dataframe(table="proj.logs.frames", dataframe=frame)

    stream_rows([]) >> stream_frame(None)


manifests()
"""


def test_bigquery_streaming_inserts_append(tmp_path: Path) -> None:
    # BigQuery's streaming inserts add the rows they are given (no replace; row_ids deduplicate only
    # for about a minute): a retry or rerun streams them again, as client.insert_rows does
    report = _lint(tmp_path, "streaming.py", _STREAMING)
    assert _at(seen(report), "IDEM002") == [(11, "stream_rows"), (16, "stream_frame")]
    assert "insert_rows_json(proj.logs.manifest_stg)" in seen(report)[0].message


_REPORTS = """from datetime import datetime, timedelta
import requests
from airflow.decorators import dag, task
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.providers.slack.transfers.sql_to_slack import SqlToSlackOperator

WEBHOOK = "https://hooks.slack.com/services/T000/B000/XXX"


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
def reports():
    SqlToSlackOperator(
        task_id="blocks_report",
        sql_conn_id="relay",
        sql="SELECT builder, count(*) FROM blocks WHERE at BETWEEN now() - interval '1 day' AND now()",
        slack_conn_id="slack",
        slack_message="Blocks in the past 24 hours: {{ results_df }}",
    )

    @task
    def weekly_runs():
        since = datetime.now() - timedelta(days=7)
        rows = PostgresHook("meta").get_records("SELECT count(*) FROM runs WHERE started > %s", (since,))
        requests.post(WEBHOOK, json={"text": f"runs this week: {rows[0][0]}"})

    @task
    def weekly_load():
        since = datetime.now() - timedelta(days=7)
        hook = PostgresHook("wh")
        rows = hook.get_records("SELECT id, amount FROM payments WHERE paid_at > %s", (since,))
        hook.insert_rows("weekly_payments", rows)
        requests.post(WEBHOOK, json={"text": f"loaded {len(rows)} payments"})

    weekly_runs() >> weekly_load()


reports()
"""


def test_a_relative_window_only_reported_to_chat_is_information(tmp_path: Path) -> None:
    # the two reports post "the last day / week" to Slack and write nothing: a rerun posts the span
    # before its own moment; the load that also posts keeps its finding (the span it stores moves; it
    # appends: round 34b made a 7-day upsert of a daily catchup=False DAG a rolling window, information)
    report = _lint(tmp_path, "reports.py", _REPORTS)
    assert [task for _, task in _at(seen(report), "IDEM004")] == ["weekly_load"]
    # the unshifted now() closing the report's span (BETWEEN now() - 1 day AND now()) is the same span
    assert _at(report.findings, "IDEM001") == []
    assert sorted(task for _, task in _at(explained(report), "IDEM004")) == ["blocks_report", "weekly_runs"]

"""Round 34b (issue 35, lint49, docs/lint-evaluation.md): two true but harmless shapes of round 34.

A rolling reprocessing window (the clock shifted back by more than the DAG's period, as the start of
the span each run rewrites, on a DAG with catchup off, written by an overwrite, a delete-and-reload
or an upsert) is IDEM004 information; a DAG whose every task runs after a ``LatestOnlyOperator`` has
a harmless catch-up (IDEM005 information) and counts as catchup off for the first rule. The guards
keep what must stay a finding: a window of one period, an append, an unknown schedule, a catch-up
with no gate, a gate some task does not follow, a single day N days back.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import finding_rows, lint_files

_HEAD = """\
from datetime import datetime, timedelta

from airflow.models import Variable
from airflow.sdk import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
"""


def _line(text: str, needle: str) -> int:
    """The 1-based line of the first line holding `needle`."""
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def _rule(report: LintReport, rule: str) -> list[tuple[str, str, int, str | None]]:
    return [r for r in finding_rows(report) if r[0] == rule]


def _info(report: LintReport, rule: str) -> list[tuple[int, str]]:
    return sorted((f.line, f.message) for f in report.information if f.rule == rule)


_SPARK = _HEAD + (
    "from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator\n\n"
    "cluster = {\n"
    "    'spark_version': '7.3.x-scala2.12',\n"
    "    'spark_conf': {'spark.sql.sources.partitionOverwriteMode': 'dynamic'},\n"
    "}\n"
    "report_job = {\n"
    "    'main_class_name': 'com.example.Runner',\n"
    "    'parameters': [\n"
    "        'START_DATE=' + (datetime.now() - timedelta(days=int(Variable.get('LOOKBACK_DAYS'))))"
    ".strftime('%Y-%m-%d'),\n"
    "        'END_DATE=' + datetime.now().strftime('%Y-%m-%d'),\n"
    "    ],\n"
    "}\n\n"
    "with DAG('report', schedule_interval='0 9 * * *', start_date=datetime(2024, 1, 1), catchup={catchup}):\n"
    "    DatabricksSubmitRunOperator(task_id='build', new_cluster={cluster}, spark_jar_task=report_job)\n"
)


def test_a_variable_lookback_handed_to_a_spark_job_that_overwrites_partitions_is_information(
    tmp_path: Path,
) -> None:
    dag = _SPARK.replace("{catchup}", "False").replace("{cluster}", "cluster")
    report = lint_files(tmp_path, {"dags/report.py": dag})
    assert _rule(report, "IDEM004") == []
    info = _info(report, "IDEM004")
    assert [line for line, _ in info] == [_line(dag, "'START_DATE='")]
    assert "rolling reprocessing window" in info[0][1] and "LOOKBACK_DAYS" in info[0][1]


def test_guard_the_same_lookback_with_catchup_on_or_a_cluster_that_appends_stays_a_finding(
    tmp_path: Path,
) -> None:
    """Guard (passes on main too): with catchup left on, or a cluster with no overwrite mode, the
    window is a finding at the START_DATE line."""
    on = _SPARK.replace("{catchup}", "True").replace("{cluster}", "cluster")
    plain = _SPARK.replace("{catchup}", "False").replace("{cluster}", "{'spark_version': '7.3'}")
    for name, dag in (("on", on), ("plain", plain)):
        report = lint_files(tmp_path / name, {"dags/report.py": dag})
        assert _rule(report, "IDEM004") == [("IDEM004", "report.py", _line(dag, "'START_DATE='"), None)]


def _sql_dag(schedule: str, catchup: str, sql: str) -> str:
    return _HEAD + (
        f"with DAG('sales', schedule={schedule!r}, start_date=datetime(2024, 1, 1), catchup={catchup}):\n"
        f"    SQLExecuteQueryOperator(task_id='reload', conn_id='mysql', sql='''{sql}''')\n"
    )


_DELETE_RELOAD = (
    "DELETE FROM sales.daily WHERE day >= CURRENT_DATE - 90;\n"
    "INSERT INTO sales.daily SELECT day, SUM(amount) FROM sales.orders\n"
    "WHERE day >= CURRENT_DATE - 90 GROUP BY day;"
)


def test_a_90_day_delete_and_reload_on_a_daily_dag_with_catchup_off_is_information(tmp_path: Path) -> None:
    dag = _sql_dag("@daily", "False", _DELETE_RELOAD)
    report = lint_files(tmp_path, {"dags/sales.py": dag})
    assert _rule(report, "IDEM004") == []
    assert _rule(report, "IDEM002") == []
    assert [line for line, _ in _info(report, "IDEM004")] == [_line(dag, "DELETE FROM")]


def test_guard_an_append_a_single_day_or_an_unknown_schedule_keeps_the_window(tmp_path: Path) -> None:
    """Guard (passes on main too): the same 90 days appended with no delete; a delete-and-reload of
    the single day three days back (a late run skips a day); a schedule the linter cannot read."""
    append = _sql_dag(
        "@daily",
        "False",
        "INSERT INTO sales.daily SELECT * FROM sales.orders WHERE day >= CURRENT_DATE - 90;",
    )
    one_day = _sql_dag(
        "@daily",
        "False",
        "DELETE FROM sales.daily WHERE day = CURRENT_DATE - 3;\n"
        "INSERT INTO sales.daily SELECT * FROM sales.orders WHERE day = CURRENT_DATE - 3;",
    )
    unknown = _sql_dag("@daily", "False", _DELETE_RELOAD).replace(
        "schedule='@daily'", "schedule=MyTimetable()"
    )
    for name, dag, needle in (
        ("append", append, "INSERT INTO"),
        ("one_day", one_day, "DELETE FROM"),
        ("unknown", unknown, "DELETE FROM"),
    ):
        report = lint_files(tmp_path / name, {"dags/sales.py": dag})
        assert _rule(report, "IDEM004") == [("IDEM004", "sales.py", _line(dag, needle), "reload")], name


_HOURLY = _HEAD + (
    "from airflow.operators.python import PythonOperator\n"
    "from airflow.providers.postgres.hooks.postgres import PostgresHook\n\n\n"
    "def fetch_posts():\n"
    "    since = (datetime.now() - timedelta(hours={hours})).isoformat()\n"
    "    rows = api_posts(created_after=since)\n"
    "    PostgresHook('pg').run(\n"
    "        'INSERT INTO posts (id, body) VALUES (%s, %s) '\n"
    "        'ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body',\n"
    "        parameters=rows,\n"
    "    )\n\n\n"
    "with DAG('posts', schedule='0 * * * *', start_date=datetime(2024, 1, 1), catchup=False):\n"
    "    PythonOperator(task_id='fetch', python_callable=fetch_posts)\n"
)


def test_a_six_hour_pull_upserted_by_key_on_an_hourly_dag_is_information(tmp_path: Path) -> None:
    dag = _HOURLY.replace("{hours}", "6")
    report = lint_files(tmp_path, {"dags/posts.py": dag})
    assert _rule(report, "IDEM004") == []
    assert [line for line, _ in _info(report, "IDEM004")] == [_line(dag, "since =")]


def test_guard_the_last_hour_of_an_hourly_dag_stays_a_finding(tmp_path: Path) -> None:
    """Guard (passes on main too): one period back (yih5025's Truth Social posts): a late or
    cleared run loses the hour in between."""
    dag = _HOURLY.replace("{hours}", "1")
    report = lint_files(tmp_path, {"dags/posts.py": dag})
    assert _rule(report, "IDEM004") == [("IDEM004", "posts.py", _line(dag, "since ="), "fetch")]


def test_a_second_window_of_the_task_shows_when_the_first_is_rolling(tmp_path: Path) -> None:
    """The task's first window (30 days, rolling) is information; its second (the last day, one
    period) was folded into the first as one cause, and is reported in its place."""
    dag = _HOURLY.replace("{hours}", "6").replace("schedule='0 * * * *'", "schedule='@daily'")
    dag = dag.replace(
        "    rows = api_posts",
        "    recent = (datetime.now() - timedelta(days=1)).isoformat()\n    rows = api_posts",
    )
    dag = dag.replace(
        "(datetime.now() - timedelta(hours=6)).isoformat()", "datetime.now() - timedelta(days=30)"
    )
    dag = dag.replace("created_after=since)", "created_after=since, hot_after=recent)")
    report = lint_files(tmp_path, {"dags/posts.py": dag})
    assert _rule(report, "IDEM004") == [("IDEM004", "posts.py", _line(dag, "recent ="), "fetch")]
    assert [line for line, _ in _info(report, "IDEM004")] == [_line(dag, "since =")]


_GATED = _HEAD + (
    "from airflow.operators.latest_only import LatestOnlyOperator\n\n"
    "with DAG('stats', schedule_interval='0 */3 * * *', start_date=datetime(2021, 8, 3)) as dag:\n"
    "    latest = LatestOnlyOperator(task_id='latest_only')\n"
    "    load = SQLExecuteQueryOperator(\n"
    "        task_id='load',\n"
    "        conn_id='pg',\n"
    "        sql='''INSERT INTO stats SELECT site, day, count(*) FROM clicks\n"
    "WHERE day >= now() - interval '7 days' GROUP BY site, day\n"
    "ON CONFLICT (site, day) DO UPDATE SET n = EXCLUDED.n''',\n"
    "    )\n"
    "    rates = SQLExecuteQueryOperator(task_id='rates', conn_id='pg', sql='UPDATE rates SET r = 1'{rule})\n"
    "    latest >> load\n"
    "    load >> rates\n"
)


def test_catch_up_behind_a_latest_only_operator_is_information_and_counts_as_catchup_off(
    tmp_path: Path,
) -> None:
    """No ``catchup=`` on an Airflow 2 DAG (on by default), but every task follows the gate: the
    caught-up runs skip all their work. The 7-day upsert of the 3-hourly DAG is then rolling."""
    dag = _GATED.replace("{rule}", "")
    report = lint_files(tmp_path, {"dags/stats.py": dag})
    assert _rule(report, "IDEM005") == []
    assert [line for line, _ in _info(report, "IDEM005")] == [_line(dag, "with DAG(")]
    assert "LatestOnlyOperator" in _info(report, "IDEM005")[0][1]
    assert _rule(report, "IDEM004") == []
    assert [line for line, _ in _info(report, "IDEM004")] == [_line(dag, "interval '7 days'")]


def test_guard_a_task_that_runs_after_a_skip_or_is_not_behind_the_gate_keeps_the_catch_up(
    tmp_path: Path,
) -> None:
    """Guard (passes on main too): a task with ``trigger_rule='all_done'`` runs in every caught-up
    run; a task no edge puts after the gate too. Both DAGs keep IDEM005 (at the DAG's line) and the
    window stays a finding (catch-up is on)."""
    after_skip = _GATED.replace("{rule}", ", trigger_rule='all_done'")
    loose = _GATED.replace("{rule}", "").replace("    load >> rates\n", "")
    for name, dag in (("after_skip", after_skip), ("loose", loose)):
        report = lint_files(tmp_path / name, {"dags/stats.py": dag})
        assert _rule(report, "IDEM005") == [("IDEM005", "stats.py", _line(dag, "with DAG("), None)], name
        assert _rule(report, "IDEM004") == [("IDEM004", "stats.py", _line(dag, "interval '7 days'"), "load")]

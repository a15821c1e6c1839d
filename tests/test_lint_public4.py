"""The linter's round-4 changes from public DAG repositories (issue 35, docs/lint-evaluation.md): each
test states a tuning repository's shape in a few lines and the findings a reviewer would expect,
counted by hand here (not from the linter's own tables)."""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths
from tests.lintfiles import explained, seen

_HEAD = """from datetime import date, datetime, timedelta

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook
"""


def _lint(tmp_path: Path, body: str, name: str = "dag_38.py") -> LintReport:
    (tmp_path / name).write_text(_HEAD + body)
    return lint_paths([tmp_path])


def _rules(report: LintReport) -> list[tuple[str, int]]:
    return sorted((f.rule, f.line) for f in seen(report))


def _line(body: str, needle: str) -> int:
    """The 1-based line of `needle` in the file `_lint` writes (the header's lines included)."""
    text = _HEAD + body
    return text[: text.index(needle)].count("\n") + 1


def _report_dag(dag_id: str, flush: bool = True) -> str:
    last = "" if flush else "# "
    return f"""
with DAG({dag_id!r}, schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):
    SQLExecuteQueryOperator(
        task_id='extract', conn_id='wh',
        sql="DELETE FROM reports.rpt_flow; INSERT INTO reports.rpt_flow SELECT * FROM events",
    )
    SQLExecuteQueryOperator(task_id='report', conn_id='wh', sql="SELECT * FROM reports.rpt_flow")
    {last}SQLExecuteQueryOperator(task_id='flush', conn_id='wh', sql="DELETE FROM reports.rpt_flow")
"""


def test_a_scratch_table_two_dags_rebuild_and_flush_is_information(tmp_path: Path) -> None:
    """ilri's report DAGs: each DAG's extract deletes all of a shared scratch table and inserts, its
    report reads it, its flush empties it. No run leaves rows behind: information, no IDEM007."""
    report = _lint(tmp_path, _report_dag("daily_report") + _report_dag("weekly_report"))
    assert [f for f in seen(report) if f.rule == "IDEM007"] == []
    informed = {f"{f.dag_id}.{f.task_id}" for f in explained(report) if f.rule == "IDEM007"}
    assert {"daily_report.extract", "weekly_report.extract"} <= informed


def test_two_dags_rebuilding_a_kept_table_stay_a_finding(tmp_path: Path) -> None:
    """Without the flush, the table is each DAG's output, and the last rebuild wins: IDEM007 for both."""
    body = _report_dag("a", flush=False) + _report_dag("b", flush=False)
    report = _lint(tmp_path, body)
    assert sorted(f.dag_id for f in seen(report) if f.rule == "IDEM007") == ["a", "b"]


_STATEMENT = """

def save_state(key, value):
    cur = PostgresHook(postgres_conn_id='wh').get_conn().cursor()
    statement = "DELETE FROM pipeline_state WHERE state_key = %(key)s"
    cur.execute(statement, {'key': key})
    statement = "INSERT INTO pipeline_state (state_key, state_value) VALUES (%(key)s, %(value)s)"
    cur.execute(statement, {'key': key, 'value': value})


def save_log(path):
    cur = PostgresHook(postgres_conn_id='wh').get_conn().cursor()
    statement = "INSERT INTO pipeline_log (path) VALUES (%(path)s)"
    cur.execute(statement, {'path': path})
    statement = "SELECT count(*) FROM pipeline_log"
    cur.execute(statement)


with DAG('state', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id='begin', python_callable=save_state, op_args=['run', 'on'])
    PythonOperator(task_id='log', python_callable=save_log, op_args=['/tmp/x'])
"""


def test_a_statement_variable_has_its_value_at_each_call(tmp_path: Path) -> None:
    """hms-dbmi's OracleDataAccess: `statement` is a DELETE of the key, then the INSERT of it. Read
    at each execute, the task replaces its key (no IDEM002); a task whose INSERT is followed by a
    SELECT in the same variable still appends (IDEM002 at the INSERT's execute)."""
    report = _lint(tmp_path, _STATEMENT)
    appends = [f for f in seen(report) if f.rule == "IDEM002"]
    assert [(f.task_id, f.line) for f in appends] == [
        ("log", _line(_STATEMENT, 'statement = "INSERT INTO pipeline_log'))
    ]


_FILE_NAMES = """
start_date = date.today() - timedelta(days=1)
now = datetime.now()
OUTPUT = '/tmp/out/'


def render(**context):
    report_pdf = OUTPUT + 'Daily-Report-' + datetime.today().strftime('%Y%m%d') + '.pdf'
    heading = f"<div><strong>Report Date</strong>: {now.strftime('%Y-%m-%d')}</div>"
    with open(OUTPUT + f"{datetime.now():%Y%m%d_%H%M%S}.html", 'w') as out:
        out.write(heading + report_pdf)


with DAG(
    'daily_report', schedule='@daily', start_date=datetime(2023, 7, 20), catchup=False,
    params={'start_date': start_date},
):
    PythonOperator(task_id='render', python_callable=render)
"""


def test_a_date_that_only_names_a_file_is_information_not_a_shift(tmp_path: Path) -> None:
    """ilri's reports: `'Daily-Report-' + today().strftime(..) + '.pdf'` concatenates text (no span:
    was IDEM004), an HTML heading and an output file's name only label the output (information).
    The module variable `start_date = today() - 1 day` is the report's window passed in params, not
    the DAG's start_date: IDEM004 at its line (was read as a start_date)."""
    report = _lint(tmp_path, _FILE_NAMES)
    assert _rules(report) == [("IDEM004", _line(_FILE_NAMES, "start_date = date.today()"))]
    labels = sorted(f.line for f in explained(report) if f.rule == "IDEM003" and "names a file" in f.message)
    assert labels == [
        _line(_FILE_NAMES, "now = datetime.now()"),
        _line(_FILE_NAMES, "report_pdf ="),
        _line(_FILE_NAMES, "with open("),
    ]


def test_a_date_written_as_data_stays_a_finding(tmp_path: Path) -> None:
    """A clock value made text and stored in a table is data: IDEM003, as before."""
    body = """

def load(**context):
    today = datetime.now().strftime('%Y-%m-%d')
    PostgresHook(postgres_conn_id='wh').run("INSERT INTO daily (day) VALUES ('" + today + "')")


with DAG('daily', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id='load', python_callable=load)
"""
    report = _lint(tmp_path, body)
    assert ("IDEM003", _line(body, "today = datetime.now()")) in _rules(report)
    assert not [f for f in seen(report) if f.rule == "IDEM004"]


_VARIABLES = """

def manage(**context):
    Variable.set('city_dynamic_asset_id', '42')
    Variable.set('city_db_view_name', 'v_city')
    Variable.set('city_known_ids', [], serialize_json=True)
    Variable.set('orders_max_id', 0)


def sync(**context):
    view = Variable.get('city_db_view_name')
    asset = Variable.get('city_dynamic_asset_id')
    known = set(Variable.get('city_known_ids', deserialize_json=True))
    since = Variable.get('orders_max_id')
    hook = PostgresHook(postgres_conn_id='wh')
    rows = hook.get_records(f"SELECT id FROM {view} WHERE id > {since}")
    hook.run("INSERT INTO pushed SELECT id FROM " + view + " ON CONFLICT (id) DO NOTHING")
    return [asset, sorted(known - {r[0] for r in rows})]


with DAG('city', schedule='@hourly', start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id='manage', python_callable=manage)
    PythonOperator(task_id='sync', python_callable=sync)
"""


def test_configuration_variables_are_no_watermark_a_key_set_is_information(tmp_path: Path) -> None:
    """WEDO's snapshot DAGs save an asset's id and a view's name (configuration) and the ids the last
    sync saw (a snapshot to diff): neither is a time window. A saved `orders_max_id` still is."""
    report = _lint(tmp_path, _VARIABLES)
    watermarks = [f for f in seen(report) if f.rule == "IDEM004"]
    assert [f.line for f in watermarks] == [_line(_VARIABLES, "since = Variable.get")]
    keys = [f for f in explained(report) if f.rule == "IDEM004" and "city_known_ids" in f.message]
    assert [f.line for f in keys] == [_line(_VARIABLES, "known = set(")]


def test_a_false_flag_queue_is_information(tmp_path: Path) -> None:
    """Greenstand's cluster job: insert the rows of trees still flagged `= false`, then set the flag,
    in one task: a processed-flag queue (information), like `IS NULL` since round 1."""
    body = """
with DAG('cluster', schedule='@hourly', start_date=datetime(2024, 1, 1), catchup=False):
    SQLExecuteQueryOperator(task_id='assign', conn_id='wh', sql=[
        "INSERT INTO tree_region (tree_id, region_id) SELECT t.id, r.id FROM trees t JOIN region r "
        "ON r.id = t.region WHERE t.assigned = false",
        "UPDATE trees SET assigned = true FROM tree_region WHERE tree_region.tree_id = trees.id",
    ])
"""
    report = _lint(tmp_path, body)
    assert [f for f in seen(report) if f.rule == "IDEM002"] == []
    assert any(f.rule == "IDEM002" and f.task_id == "assign" for f in explained(report))

"""Round 36f of issue 35 (lint61, docs/lint-evaluation.md): code the linter did not read yet.

(a) A ``.sql`` file a task's code opens by a path it is given: a helper that returns the file's text
(``return f.read()``, ``Path(..).read_text()``), a path a TaskFlow call or ``op_args`` passes, the
statements of the file run one by one (``sql.split(";")``, ``sqlparse.split``), a Jinja template made
of it: the file's INSERTs and clock reads are that task's SQL, at the file's lines, as an operator's
``sql=`` file's are.

(b) A DAG's ``default_args`` or arguments loaded from a JSON or YAML file of the repository
(``json.load(open(..))``, a helper returning ``yaml.safe_load(f)``): the file's ``retries``,
``start_date`` and ``catchup`` count as a dict written in the DAG file would; ``catchup`` in
``default_args`` counts for nothing, as in Airflow 2 and 3 (``airflow.sdk.definitions.dag.DAG.catchup``
is a DAG attribute whose default comes from ``[scheduler] catchup_by_default``, never from
``default_args``), and the finding says so.

(c) A Python script of the repository a task runs (``bash_command="cd /opt/airflow/dags && python
scripts/load.py {{ ds }}"``, ``$AIRFLOW__CORE__DAGS_FOLDER/scripts/load.py``, an ``SSHOperator``'s
``command``, ``subprocess.run(["python", ..])`` in a callable): the script's top-level code (and the
functions it calls) is the task's code, its findings at the script's lines, as a
``SparkSubmitOperator``'s application already was.

Every finding asserted is a defect (in ``report.findings``, not information); lines are counted by
hand in the files below. On cf69dd7 16 of these 26 tests fail; the ten that pass there are the
``*_counter`` tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_idempotent.lint import LintReport
from tests.lintfiles import lint_files

#: an append (IDEM002, line 2) and a clock filter (IDEM001: today's rows picked by equality, line 4)
_APPEND_SQL = """\
-- daily load
INSERT INTO sales.daily (day, total)
SELECT day, total FROM staging.orders
WHERE day = CURRENT_DATE;
"""

#: the same rows replaced by the run's window: nothing to report
_KEYED_SQL = """\
INSERT INTO sales.daily (day, total)
SELECT day, total FROM staging.orders
ON CONFLICT (day) DO UPDATE SET total = EXCLUDED.total;
"""

_HEAD = """\
from datetime import datetime
import os
from pathlib import Path

import sqlparse
from airflow import DAG
from airflow.decorators import dag, task
from airflow.operators.python import PythonOperator
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook
from google.cloud import bigquery
from jinja2 import Template

SQL_DIR = os.path.join(os.path.dirname(__file__), "sql")
"""

_SHAPES = {
    # a helper returns the file's text; the task runs it on a hook
    "helper_returns_text": """
def read_sql(name):
    with open(os.path.join(SQL_DIR, name)) as f:
        return f.read()


def load():
    PostgresHook("pg").run(read_sql("load.sql"))


with DAG("load_dag", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False):
    PythonOperator(task_id="load", python_callable=load)
""",
    # a helper returns Path(..).read_text() through a local; a BigQuery client's query runs it
    "helper_read_text_client": """
def sql_text(name):
    path = Path(__file__).parent / "sql" / name
    text = path.read_text()
    return text


@dag(start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False)
def load_dag():
    @task
    def load():
        bigquery.Client().query(sql_text("load.sql")).result()

    load()


load_dag()
""",
    # DAG code reads the file through two helpers (one returns its path, one its text) for an operator
    "helper_returns_path": """
def query_path(name):
    root = os.path.dirname(__file__)
    return os.path.join(root, f"sql/{name}.sql")


def file_to_string(path):
    with open(path, "r") as sql_file:
        return sql_file.read()


with DAG("load_dag", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False):
    query = file_to_string(query_path("load")).format(**{"project": "p"})
    BigQueryInsertJobOperator(task_id="load", configuration={"query": {"query": query}})
""",
    # a TaskFlow call passes the path; the task opens it
    "taskflow_path_argument": """
@dag(start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False)
def load_dag():
    @task
    def load(sql_path: str):
        PostgresHook("pg").run(Path(sql_path).read_text())

    load(str(Path(__file__).parent / "sql" / "load.sql"))


load_dag()
""",
    # op_args gives the path by position
    "op_args_path": """
def run_file(path):
    with open(path) as fh:
        PostgresHook("pg").run(fh.read())


with DAG("load_dag", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False):
    PythonOperator(task_id="load", python_callable=run_file, op_args=[os.path.join(SQL_DIR, "load.sql")])
""",
    # the file's statements run one by one
    "split_statements": """
def load(sql_file):
    sql = open(os.path.join(SQL_DIR, sql_file)).read()
    cursor = PostgresHook("pg").get_conn().cursor()
    for statement in sql.split(";"):
        if statement.strip():
            cursor.execute(statement)


with DAG("load_dag", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False):
    PythonOperator(task_id="load", python_callable=load, op_kwargs={"sql_file": "load.sql"})
""",
    "sqlparse_statements": """
def load(sql_file):
    sql = open(os.path.join(SQL_DIR, sql_file)).read()
    cursor = PostgresHook("pg").get_conn().cursor()
    for statement in sqlparse.split(sql):
        cursor.execute(statement)


with DAG("load_dag", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False):
    PythonOperator(task_id="load", python_callable=load, op_kwargs={"sql_file": "load.sql"})
""",
    # a Jinja template made of the file, rendered by the task
    "jinja_template": """
def load(sql_file, **context):
    query = Template(open(os.path.join(SQL_DIR, sql_file)).read()).render(ds=context["ds"])
    PostgresHook("pg").run(query)


with DAG("load_dag", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False):
    PythonOperator(task_id="load", python_callable=load, op_kwargs={"sql_file": "load.sql"})
""",
}


def _lint(tmp_path: Path, body: str, sql: str) -> LintReport:
    return lint_files(tmp_path, {"dags/load.py": _HEAD + body, "dags/sql/load.sql": sql})


def _rows(report: LintReport) -> list[tuple[str, str, int, str | None]]:
    return sorted(
        (f.rule, Path(f.file).relative_to(Path(f.file).parents[1]).as_posix(), f.line, f.task_id)
        for f in report.findings
    )


@pytest.mark.parametrize("shape", sorted(_SHAPES))
def test_a_sql_file_opened_by_path_is_the_tasks_sql(tmp_path: Path, shape: str) -> None:
    report = _lint(tmp_path, _SHAPES[shape], _APPEND_SQL)
    assert _rows(report) == [
        ("IDEM001", "sql/load.sql", 4, "load"),
        ("IDEM002", "sql/load.sql", 2, "load"),
    ]
    assert not [f for f in report.information if f.file.endswith("load.sql")]


@pytest.mark.parametrize("shape", ["helper_returns_text", "taskflow_path_argument", "split_statements"])
def test_a_keyed_sql_file_read_by_path_is_clean_counter(tmp_path: Path, shape: str) -> None:
    assert _rows(_lint(tmp_path, _SHAPES[shape], _KEYED_SQL)) == []


def test_a_template_path_argument_stays_unknown_counter(tmp_path: Path) -> None:
    """A path Airflow renders at run time (``{{ params.sql }}``) names no file the linter can read."""
    body = _SHAPES["taskflow_path_argument"].replace(
        'str(Path(__file__).parent / "sql" / "load.sql")', '"{{ params.sql }}"'
    )
    assert _rows(_lint(tmp_path, body, _APPEND_SQL)) == []


# (b) a DAG's arguments loaded from a JSON or YAML file of the repository ---------------------------

_JSON_ARGS = """\
{"default_args": {"owner": "data", "retries": 2, "start_date": "2024-01-01"}}
"""

_POSTING_DAG = """\
import json
from datetime import datetime

import requests
from airflow import DAG
from airflow.operators.python import PythonOperator

CONFIG = json.load(open("config/settings.json"))


def push_orders():
    for order in fetch_orders():
        requests.post("https://shop.example.com/api/orders", json=order)


with DAG("push", default_args=CONFIG["default_args"], schedule="@daily", catchup=False):
    PythonOperator(task_id="push", python_callable=push_orders)
"""


def test_b_retries_from_a_json_config_file(tmp_path: Path) -> None:
    """retries=2 in the JSON file's default_args: the POST that creates orders is retried (IDEM006 at
    the post, line 13)."""
    report = lint_files(tmp_path, {"dags/push.py": _POSTING_DAG, "dags/config/settings.json": _JSON_ARGS})
    assert _rows(report) == [("IDEM006", "dags/push.py", 13, "push")]


def test_b_no_retries_in_the_json_config_file_counter(tmp_path: Path) -> None:
    settings = _JSON_ARGS.replace('"retries": 2', '"retries": 0')
    report = lint_files(tmp_path, {"dags/push.py": _POSTING_DAG, "dags/config/settings.json": settings})
    assert _rows(report) == []


_YAML_DAG = """\
from pathlib import Path

import yaml
from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator


def load_config():
    with open(Path(__file__).parent / "dag.yaml") as f:
        return yaml.safe_load(f)


CFG = load_config()

with DAG("rollup", **CFG["dag"]):
    SQLExecuteQueryOperator(
        task_id="rollup",
        conn_id="pg",
        sql="DELETE FROM daily WHERE day = CURRENT_DATE - 1; "
        "INSERT INTO daily SELECT * FROM src WHERE day = CURRENT_DATE - 1",
    )
"""

_YAML = """\
dag:
  schedule_interval: "@daily"
  start_date: 2024-01-01
  catchup: {catchup}
"""


def test_b_catchup_from_a_yaml_config_file(tmp_path: Path) -> None:
    """The YAML file's catchup: true over a task whose window is the clock's yesterday: every window
    since 2024-01-01 is run with the same yesterday (IDEM005 at the DAG's line, 15)."""
    files = {"dags/rollup.py": _YAML_DAG, "dags/dag.yaml": _YAML.format(catchup="true")}
    rows = [r for r in _rows(lint_files(tmp_path, files)) if r[0] == "IDEM005"]
    assert rows == [("IDEM005", "dags/rollup.py", 15, None)]


def test_b_catchup_off_in_the_yaml_config_file_counter(tmp_path: Path) -> None:
    files = {"dags/rollup.py": _YAML_DAG, "dags/dag.yaml": _YAML.format(catchup="false")}
    assert [r for r in _rows(lint_files(tmp_path, files)) if r[0] == "IDEM005"] == []


def test_b_catchup_in_default_args_is_ignored(tmp_path: Path) -> None:
    """Airflow takes catchup only as a DAG argument: the file's default_args say catchup: false, the
    DAG (Airflow 2: schedule_interval=) says nothing, so the default (on) holds: IDEM005, and its
    message says why the file's catchup does not count."""
    dag = _YAML_DAG.replace('**CFG["dag"]', 'schedule_interval="@daily", default_args=CFG["default_args"]')
    config = "default_args:\n  start_date: 2024-01-01\n  catchup: false\n"
    report = lint_files(tmp_path, {"dags/rollup.py": dag, "dags/dag.yaml": config})
    (found,) = [f for f in report.findings if f.rule == "IDEM005"]
    assert found.line == 15
    assert "the catchup in its default_args is ignored" in found.message


# (c) a repository's Python script run by a task's command ------------------------------------------

#: an append at line 10 of the script, run under ``if __name__ == "__main__"``
_SCRIPT = """\
import sys

import psycopg2


def main(day):
    conn = psycopg2.connect("dbname=dw")
    cur = conn.cursor()
    cur.execute(
        "INSERT INTO sales.daily SELECT * FROM staging.orders WHERE day = %s", (day,)
    )
    conn.commit()


if __name__ == "__main__":
    main(sys.argv[1])
"""

_RUNNING_DAG = """\
import subprocess
from datetime import datetime

from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.operators.python import PythonOperator
from airflow.providers.ssh.operators.ssh import SSHOperator


CD = "cd /opt/airflow/dags && "
FOLDER = "python3 -u $AIRFLOW__CORE__DAGS_FOLDER"


def run_script(**context):
    subprocess.run(["python3", "/opt/airflow/dags/scripts/load.py", context["ds"]], check=True)


with DAG("run", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False):
    {task}
"""

_RUNNERS = {
    "bash_cd": 'BashOperator(task_id="load", bash_command=CD + "python scripts/load.py {{ ds }}")',
    "bash_dags_folder": 'BashOperator(task_id="load", bash_command=FOLDER + "/scripts/load.py {{ ds }}")',
    "ssh": 'SSHOperator(task_id="load", ssh_conn_id="etl", command="python scripts/load.py {{ ds }}")',
    "subprocess": 'PythonOperator(task_id="load", python_callable=run_script)',
}


@pytest.mark.parametrize("runner", sorted(_RUNNERS))
def test_c_a_script_the_task_runs_is_its_code(tmp_path: Path, runner: str) -> None:
    dag = _RUNNING_DAG.format(task=_RUNNERS[runner])
    report = lint_files(tmp_path, {"dags/run.py": dag, "dags/scripts/load.py": _SCRIPT})
    assert _rows(report) == [("IDEM002", "scripts/load.py", 10, "load")]


def test_c_a_keyed_script_is_clean_counter(tmp_path: Path) -> None:
    script = _SCRIPT.replace("WHERE day = %s", "WHERE day = %s ON CONFLICT (day) DO NOTHING")
    dag = _RUNNING_DAG.format(task=_RUNNERS["bash_cd"])
    assert _rows(lint_files(tmp_path, {"dags/run.py": dag, "dags/scripts/load.py": script})) == []


@pytest.mark.parametrize(
    "command",
    [
        "python scripts/{{ params.job }}.py",  # a script named at run time
        "python other/load.py",  # no such script in the repository
        "cat scripts/load.py",  # the script is read, not run
    ],
)
def test_c_a_script_not_known_or_not_run_is_not_read_counter(tmp_path: Path, command: str) -> None:
    dag = _RUNNING_DAG.format(task=f'BashOperator(task_id="load", bash_command="{command}")')
    assert _rows(lint_files(tmp_path, {"dags/run.py": dag, "dags/scripts/load.py": _SCRIPT})) == []


def test_a_jinja_fields_the_render_call_gives_are_filled(tmp_path: Path) -> None:
    """``render(table="#staging_rows")``: the rows go to a SQL Server temp table, no append to report;
    the same template rendered into ``sales.daily`` appends (line 1 of the file)."""
    sql = "INSERT INTO {{ table }} SELECT day, total FROM staging.orders;\n"
    body = _SHAPES["jinja_template"].replace('render(ds=context["ds"])', 'render(table="{table}")')
    temp = _lint(tmp_path / "temp", body.replace("{table}", "#staging_rows"), sql)
    assert _rows(temp) == []
    kept = _lint(tmp_path / "kept", body.replace("{table}", "sales.daily"), sql)
    assert _rows(kept) == [("IDEM002", "sql/load.sql", 1, "load")]
    assert "sales.daily" in kept.findings[0].message


_SELF_LOADED_DAG = """\
from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG("sign", schedule=None, catchup=False):
    BashOperator(task_id="sign", bash_command="python /opt/airflow/dags/scripts/sign.py '{{ ds }}'")
"""

#: a script whose module-level name is re-bound from itself: the last binding is what the name reads
_SELF_LOADED_SCRIPT = """\
import json
import sys

data = sys.argv[1]
if data.startswith("{"):
    data = json.loads(data)
print(data)
"""


def test_b_a_name_loaded_from_itself_ends(tmp_path: Path) -> None:
    """A script's ``data = json.loads(data)`` at module level: following the loaded text back to a
    file reaches the same call again; the linter must end with the value unknown, not fail on the
    file (IDEM000, a RecursionError before the value followed carried its depth into the lookup)."""
    files = {"dags/sign.py": _SELF_LOADED_DAG, "dags/scripts/sign.py": _SELF_LOADED_SCRIPT}
    report = lint_files(tmp_path, files)
    assert [f.rule for f in report.findings] == []
    assert len(report.files) == 1

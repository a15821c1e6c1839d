"""Round 36f of issue 35 (lint61, docs/lint-evaluation.md): code the linter did not read yet.

(a) A ``.sql`` file a task's code opens by a path it is given: a helper that returns the file's text
(``return f.read()``, ``Path(..).read_text()``), a path a TaskFlow call or ``op_args`` passes, the
statements of the file run one by one (``sql.split(";")``, ``sqlparse.split``), a Jinja template made
of it: the file's INSERTs and clock reads are that task's SQL, at the file's lines, as an operator's
``sql=`` file's are. Every finding asserted is a defect (in ``report.findings``, not information);
lines are counted by hand in the SQL files below. The ``*_counter`` tests pass on main too.
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

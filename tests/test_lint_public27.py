"""Round 23 (issue 35, lint27, docs/lint-evaluation.md): the false findings and misses of round 23's
fresh batch, tested with small projects of hand-written files. What each test asserts is what a
reviewer reading the files would say; all four fail on main fbc7e98 (checked against an export of
its package). The guards of the first, second and fourth pass there too; the third's need the SQL files
read, which main does not do.

- Andalusia's ``dag = resubmission_etl_pipeline()``: calling a ``@dag`` function at module level was
  reported as reading the clock, because its ``@task`` bodies read it; they run in the task, never
  when the module calls the ``@dag`` function (IDEM003, false).
- Andalusia's ``cursor.execute("SELECT GETDATE()")``, a connection test whose result is only logged:
  the server's time selected from no table chooses no rows and writes none (IDEM001, false).
- Andalusia's extracts read "yesterday" (``CONVERT(DATE, GETDATE()-1)``) and the last 4.5 hours
  (``DATEADD(MINUTE, -270, GETDATE())``) from ``.sql`` files the code opens itself
  (``with open(Path("sql") / "x.sql") as f: query = f.read()`` at module level, handed to a helper;
  ``Path(__file__).resolve().parent.parent / "sql" / "x.sql").read_text()`` run by
  ``conn.execute(text(..))``), in SQL Server's dialect, after a header of comment lines (IDEM004,
  missed). Its ``read_data`` helper runs ``pd.read_sql_query``, not read here (see the page).
- Open since round 22: a SQL Server ``#table`` and a PostgreSQL ``SELECT .. INTO TEMP`` table live
  for the session, as a ``CREATE TEMP TABLE`` does: what a task appends there is no rerun problem.
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import explained, lint_files, seen_rows

_DAG_FUNCTION = """\
from datetime import datetime, timedelta

import pendulum
from airflow.decorators import dag, task

START = pendulum.datetime(2024, 1, 1)


def window_start():
    return datetime.now() - timedelta(days=1)


@dag(dag_id="resub", schedule="0 7 * * *", start_date=START, catchup=False)
def resub():
    @task
    def extract():
        rows = {"id": [1]}
        rows["insertion_date"] = datetime.now().strftime("%Y-%m-%d %H:%M")
        return rows

    extract()


dag = resub()
since = window_start()
"""


def test_calling_a_dag_function_reads_no_clock_its_task_bodies_read(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"resub.py": _DAG_FUNCTION})
    found = seen_rows(report)
    assert not [row for row in found if row[:3] == ("IDEM003", "resub.py", 24)]
    # guards: the task's own read stays its finding, and a helper that returns "now - 1 day" to
    # module-level code is still a relative window (reported where the helper reads the clock)
    assert ("IDEM003", "resub.py", 18, "extract") in found
    assert ("IDEM004", "resub.py", 10, None) in found


_CONNECTION_TEST = """\
from datetime import datetime
import logging

import pyodbc
from airflow import DAG
from airflow.operators.python import PythonOperator


def load(**context):
    conn = pyodbc.connect("DSN=x")
    cursor = conn.cursor()
    cursor.execute("SELECT GETDATE()")
    logging.info("server time %s", cursor.fetchone()[0])
    cursor.execute("DELETE FROM dbo.visits WHERE day = ?", context["ds"])


def stamp(**context):
    conn = pyodbc.connect("DSN=x")
    conn.cursor().execute("INSERT INTO dbo.seen (day, price) SELECT ?, CURRENT_TIMESTAMP", context["ds"])


def report():
    conn = pyodbc.connect("DSN=x")
    conn.cursor().execute("SELECT id FROM dbo.visits WHERE day = CAST(GETDATE() AS DATE)")


with DAG("visits", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="load", python_callable=load)
    PythonOperator(task_id="stamp", python_callable=stamp)
    PythonOperator(task_id="report", python_callable=report)
"""


def test_the_clock_selected_from_no_table_is_no_finding(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"visits.py": _CONNECTION_TEST})
    found = seen_rows(report)
    assert ("IDEM001", "visits.py", 12, "load") not in found
    assert any(i.rule == "IDEM001" and i.line == 12 for i in explained(report))
    # guards: a clock written by an INSERT .. SELECT (no FROM either) and a clock that filters a
    # table's rows are still the SQL's clock reads
    assert ("IDEM001", "visits.py", 19, "stamp") in found
    assert ("IDEM001", "visits.py", 24, "report") in found


_YESTERDAY_SQL = """\
------------------------------------------------------------------
-- claims rejected yesterday, with the patient's age
------------------------------------------------------------------
SELECT c.id, DATEDIFF(YEAR, p.DateOfBirth, GETDATE()) AS Age
FROM claims c JOIN patients p ON p.id = c.patient_id
WHERE CONVERT(DATE, ISNULL(c.UpdatedDate, c.CreatedDate)) = CONVERT(DATE, GETDATE()-1)
"""

_LAST_HOURS_SQL = """\
-- the last 4.5 hours of visits
SELECT v.id, v.CreatedDate
FROM visits v
WHERE CONVERT(DATETIME, v.CreatedDate) >= DATEADD(MINUTE, -270, GETDATE())
"""

_AGES_SQL = """\
SELECT p.id, DATEDIFF(YEAR, p.DateOfBirth, GETDATE()) AS Age FROM patients p
"""

_HELPER = """\
import pandas as pd
from sqlalchemy import create_engine


def read_data(query, passcode):
    try:
        return pd.read_sql(query, create_engine(passcode))
    except Exception:
        raise
"""

_FILE_DAG = """\
import json
import os
import sys
from datetime import datetime
from pathlib import Path

from airflow.decorators import dag, task
from sqlalchemy import create_engine, text

sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
from src.etl_utils import read_data

with open("passcode.json", "r") as file:
    configs = json.load(file)

with open(Path("sql") / "yesterday.sql", "r") as file:
    query = file.read()


@dag(dag_id="claims", schedule="0 7 * * *", start_date=datetime(2024, 1, 1), catchup=False)
def claims():
    @task
    def extract_yesterday():
        return read_data(query, "mssql://x")

    @task
    def extract_hours():
        path = Path(__file__).resolve().parent.parent / "sql" / "last_hours.sql"
        sql = path.read_text()
        with create_engine("mssql://x").connect() as conn:
            return conn.execute(text(sql)).fetchall()

    @task
    def extract_ages():
        with open(Path("sql") / "ages.sql") as handle:
            return read_data(handle.read(), "mssql://x")

    extract_yesterday()
    extract_hours()
    extract_ages()


claims()
"""


def test_sql_server_windows_in_sql_files_the_code_opens_are_read(tmp_path: Path) -> None:
    files = {
        "dags/claims.py": _FILE_DAG,
        "src/__init__.py": "",
        "src/etl_utils.py": _HELPER,
        "sql/yesterday.sql": _YESTERDAY_SQL,
        "sql/last_hours.sql": _LAST_HOURS_SQL,
        "sql/ages.sql": _AGES_SQL,
        "passcode.json": "{}",
    }
    found = seen_rows(lint_files(tmp_path, files))
    assert ("IDEM004", "yesterday.sql", 6, "extract_yesterday") in found
    assert ("IDEM004", "last_hours.sql", 4, "extract_hours") in found
    # a file opened by a ``with`` in the task's own code reads too
    assert ("IDEM001", "ages.sql", 1, "extract_ages") in found


_TEMP_TABLES = """\
from datetime import datetime

import psycopg2
import pyodbc
from airflow import DAG
from airflow.operators.python import PythonOperator


def stage_claims():
    cur = pyodbc.connect("DSN=x").cursor()
    cur.execute("SELECT id, amount INTO #stage FROM dbo.claims WHERE day = CAST(? AS DATE)", "2024-01-01")
    cur.execute("INSERT INTO #stage (id, amount) SELECT id, amount FROM dbo.late_claims")
    cur.execute("INSERT INTO dbo.claims_copy (id, amount) SELECT id, amount FROM #stage")


def stage_orders():
    cur = psycopg2.connect("dbname=x").cursor()
    cur.execute("SELECT id INTO TEMP stage_orders FROM orders")
    cur.execute("INSERT INTO stage_orders (id) SELECT id FROM late_orders")


def keep_orders():
    cur = psycopg2.connect("dbname=x").cursor()
    cur.execute("SELECT id INTO stage_kept FROM orders")
    cur.execute("INSERT INTO stage_kept (id) SELECT id FROM late_orders")


with DAG("staging", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="stage_claims", python_callable=stage_claims)
    PythonOperator(task_id="stage_orders", python_callable=stage_orders)
    PythonOperator(task_id="keep_orders", python_callable=keep_orders)
"""


def test_session_tables_of_sql_server_and_select_into_temp_take_no_write(tmp_path: Path) -> None:
    found = seen_rows(lint_files(tmp_path, {"staging.py": _TEMP_TABLES}))
    # a #table (SQL Server) and a SELECT .. INTO TEMP table (PostgreSQL) live for the session only
    assert ("IDEM002", "staging.py", 12, "stage_claims") not in found
    assert ("IDEM002", "staging.py", 19, "stage_orders") not in found
    # guards: the permanent table the #table feeds, and a table SELECT .. INTO made permanent
    assert ("IDEM002", "staging.py", 13, "stage_claims") in found
    assert ("IDEM002", "staging.py", 25, "keep_orders") in found

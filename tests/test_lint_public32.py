"""Round 27 (issue 35, lint32, docs/lint-evaluation.md): misses of earlier rounds (tuning data now),
tested with small hand-written DAG files. What each test asserts is what a reviewer reading the files
would say; each test fails on main ac5586c, and its guards (what must stay unreported) pass there too.

- a: Embonor's ``dag = EtlDagFactory().build()`` (round 26): the class, imported from another module,
  makes ``with DAG(self.dag_id, ..) as dag:`` and its tasks in its methods; main collected no task.
- b: ``sql="{% include 'sql/load.sql' %}"`` (BigQuery ``configuration.query.query`` too): Jinja renders
  the file there, found next to the DAG or on its ``template_searchpath``; main read no SQL.
- c: ``user_defined_macros={"today": datetime.now()..}`` or a function/lambda reading the clock, used in
  a task's SQL template: the task's window is the clock's (pass Culture's history tables, round 26).
- d: a module variable ``yesterday = today() - 1 day`` that only a hand-run DAG's (``schedule=None``)
  ``params`` default takes: a UI default, as round 26 decided for the inline spelling.
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import lint_files

_FACTORY = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.postgres.operators.postgres import PostgresOperator

from pkg.config import LOAD_DAG_ID


class LoadDagFactory:
    def __init__(self):
        self.dag_id = LOAD_DAG_ID

    def build(self):
        with DAG(self.dag_id, start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False) as dag:
            PostgresOperator(task_id="append", sql="INSERT INTO f_sales SELECT * FROM s WHERE d = '{{ ds }}'")
            self._keyed(dag)
        return dag

    def _keyed(self, dag):
        PostgresOperator(
            task_id="keyed",
            sql="DELETE FROM f_k WHERE d='{{ ds }}'; INSERT INTO f_k SELECT * FROM s WHERE d='{{ ds }}'",
            dag=dag,
        )


class Settings:
    def build(self):
        return {"retries": 2}
"""


def test_a_dag_built_by_a_factory_class_of_another_module(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/config.py": 'LOAD_DAG_ID = "sales_load"\n',
            "pkg/factory.py": _FACTORY,
            # Embonor's spelling (an annotated assignment); Airflow parses a file that names airflow and dag
            "etl.py": "from airflow import DAG\n\nfrom pkg.factory import LoadDagFactory, Settings\n\n"
            "dag: DAG = LoadDagFactory().build()\nsettings = Settings().build()\n",
            "etl2.py": "from airflow import DAG\n\nfrom pkg.factory import LoadDagFactory\n\n"
            "factory = LoadDagFactory()\ndag = factory.build()\n",
        },
    )
    tasks = {(t.dag_id, t.task_id) for t in report.tasks}
    # both tasks, under the id __init__ gives (from the config module), the one made in a helper method too
    assert tasks == {("sales_load", "append"), ("sales_load", "keyed")}, tasks
    rows = {(f.rule, f.dag_id, f.task_id, Path(f.file).name, f.line) for f in report.findings}
    # the append (factory.py line 15) is reported; the keyed task deletes its window first (guard)
    assert rows == {("IDEM002", "sales_load", "append", "factory.py", 15)}, rows


_INCLUDE_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.providers.postgres.operators.postgres import PostgresOperator

with DAG("{dag_id}", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False,
         template_searchpath=["/opt/airflow/nowhere", "queries"]) as dag:
    PostgresOperator(task_id="append", sql="{{% include 'sql/{dag_id}_append.sql' %}}")
    BigQueryInsertJobOperator(
        task_id="keyed",
        configuration={{"query": {{"query": "{{% include '{dag_id}_keyed.sql' %}}", "useLegacySql": False}}}},
    )
    PostgresOperator(task_id="wrapped", sql="SELECT 1; {{% include 'sql/{dag_id}_append.sql' %}}")
"""


def test_b_sql_pulled_in_by_a_jinja_include(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path,
        {
            "dags/inc.py": _INCLUDE_DAG.format(dag_id="inc"),
            # next to the DAG file (Airflow's first search folder)
            "dags/sql/inc_append.sql": "INSERT INTO i_day SELECT * FROM sales WHERE day = '{{ ds }}'\n",
            # on the DAG's template_searchpath (a relative entry: the DAG's folder)
            "dags/queries/inc_keyed.sql": "DELETE FROM i_keyed WHERE day = '{{ ds }}';\n"
            "INSERT INTO i_keyed SELECT * FROM sales WHERE day = '{{ ds }}'\n",
        },
    )
    rows = {(f.rule, f.task_id, Path(f.file).name, f.line) for f in report.findings}
    # the included file's append is the task's, reported in the file at its line
    assert ("IDEM002", "append", "inc_append.sql", 1) in rows, rows
    # guards: the keyed include deletes its window first; SQL around an include is read as written
    assert {task for _, task, _, _ in rows} == {"append"}, rows
    keyed = next(t for t in report.tasks if t.task_id == "keyed")
    assert "i_keyed" in " ".join(keyed.targets), keyed


_MACROS_DAG = """\
from datetime import datetime, timedelta

from airflow import DAG
from airflow.providers.postgres.operators.postgres import PostgresOperator


def yesterday():
    return (datetime.now() - timedelta(days=1)).strftime("%Y-%m-%d")


def day_before(ds):
    return (datetime.strptime(ds, "%Y-%m-%d") - timedelta(days=1)).strftime("%Y-%m-%d")


with DAG("macros", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False,
         user_defined_macros={
             "today": datetime.now().strftime("%Y-%m-%d"),
             "yesterday": yesterday,
             "lastweek": lambda: datetime.now() - timedelta(days=7),
             "day_before": day_before,
             "stamp": datetime.now().isoformat(),
         }) as dag:
    PostgresOperator(task_id="today", sql="DELETE FROM a WHERE d='{{ today }}'; INSERT INTO a SELECT 1")
    PostgresOperator(task_id="yday", sql="DELETE FROM b WHERE d='{{ yesterday() }}'; INSERT INTO b SELECT 1")
    PostgresOperator(task_id="week", sql="DELETE FROM c WHERE d>='{{ lastweek() }}'; INSERT INTO c SELECT 1")
    PostgresOperator(task_id="ds", sql="DELETE FROM e WHERE d='{{ day_before(ds) }}'; INSERT INTO e SELECT 1")
"""


def test_c_user_defined_macros_that_read_the_clock(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"macros.py": _MACROS_DAG})
    rows = {(f.rule, f.task_id, f.line) for f in report.findings}
    # a macro shifted by a span is a relative window (a function's or a lambda's); today's date is a
    # clock read in the SQL (IDEM001), as {{ macros.datetime.now() }} written there would be
    assert rows == {("IDEM001", "today", 23), ("IDEM004", "yday", 24), ("IDEM004", "week", 25)}, rows
    # guards: a macro computed from the run's ds, and a clock macro no template uses (stamp), change
    # nothing; the DAG's own arguments are not reported a second time for the macros' clock reads
    message = next(f.message for f in report.findings if f.task_id == "yday")
    assert "user_defined_macros" in message and "yesterday" in message, message


_PARAMS_DAG = """\
from datetime import date, datetime, timedelta

from airflow import DAG
from airflow.models import Param
from airflow.operators.bash import BashOperator

yesterday = (date.today() - timedelta(days=1)).strftime("%Y-%m-%d")

with DAG("{dag_id}", start_date=datetime(2024, 1, 1), schedule={schedule}, catchup=False,
         params={{"since": Param(default=yesterday, type="string")}}) as dag:
    BashOperator(task_id="fetch", bash_command="fetch --since {{{{ params.since }}}}"{extra})
"""


def test_d_a_clock_variable_only_a_manual_dags_params_take(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path,
        {
            "manual.py": _PARAMS_DAG.format(dag_id="manual", schedule="None", extra=""),
            "daily.py": _PARAMS_DAG.format(dag_id="daily", schedule='"0 2 * * *"', extra=""),
            # the variable also feeds a task's command: not only a UI default
            "mixed.py": _PARAMS_DAG.format(
                dag_id="mixed", schedule="None", extra=', env={"SINCE": yesterday}'
            ),
        },
    )
    rows = {(f.rule, Path(f.file).name, f.line) for f in report.findings}
    # a hand-run DAG's form default is set by whoever triggers it: nothing to report
    assert not {r for r in rows if r[1] == "manual.py"}, rows
    # guards: a scheduled DAG's runs take the default (round 26); a variable read elsewhere stays judged
    assert ("IDEM004", "daily.py", 7) in rows and ("IDEM004", "mixed.py", 7) in rows, rows

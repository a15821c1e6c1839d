"""Round 36b of issue 35 (lint53, docs/lint-evaluation.md): the general shapes behind round 36's
harmless and false findings.

- IDEM005: catchup left to the deployment's default (an Airflow 2 DAG with no ``catchup=``) over
  tasks that take the run's window (``{{ ds }}`` in a repository helper's ``env_vars``) writes each
  window correctly: information, as an explicit ``catchup=True`` over such tasks already was;
- IDEM001: the clock's value only stamping rows a task exports to a file (``now() AS
  insrt_process_tmstmp`` in ``@task.parquet(sql=.., target="x.parquet")``) or written to an
  abbreviated audit column (``UPDT_PROCESS_TMSTMP``) is a load stamp: information, unless SQL of the
  repository (a task's, or a module no task is made of) selects by it on the table the file is
  loaded into;
- IDEM004: an XCom pulled by a key naming a file (``key='parquet'``) is no watermark, and one added to
  ``ROW_NUMBER()`` only numbers new surrogate keys.

Each shape has a counter-shape that must stay a finding. Lines are counted by hand.
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import explained, lint_files, seen, seen_rows

#: a repository helper making pods, as dea-airflow's ``utilities.k8s_operator``
_HELPER = """\
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator


def k8s_operator(dag, task_id, cmds, env_vars=None):
    return KubernetesPodOperator(
        dag=dag, task_id=task_id, name=task_id, image="etl", arguments=["bash", "-c", " && ".join(cmds)],
        env_vars=env_vars,
    )
"""

_REPORT_DAG = """\
from datetime import datetime

from airflow import DAG

from reporting import utilities

dag = DAG("report", schedule_interval="@daily", start_date=datetime(2022, 1, 1){extra})

with dag:
    utilities.k8s_operator(
        dag=dag,
        task_id="ingest",
        cmds=["report-ingestion"],
        env_vars={env},
    )
"""

_WINDOW_ENV = '{"REPORTING_DATE": "{{ ds }}", "DATA_INTERVAL_END": "{{ data_interval_end | ts }}"}'
_NO_WINDOW_ENV = '{"POD_COUNT": "4"}'


def _catchup(tmp_path: Path, env: str, extra: str = "") -> tuple[list[str], list[str]]:
    report = lint_files(
        tmp_path,
        {
            "dags/reporting/__init__.py": "",
            "dags/reporting/utilities.py": _HELPER,
            "dags/reporting/report.py": _REPORT_DAG.format(env=env, extra=extra),
        },
    )
    findings = [f.rule for f in seen(report) if f.rule == "IDEM005"]
    information = [f.message for f in explained(report) if f.rule == "IDEM005"]
    return findings, information


def test_implicit_catchup_over_tasks_taking_the_run_window_is_information(tmp_path: Path) -> None:
    findings, information = _catchup(tmp_path, _WINDOW_ENV)
    assert findings == []
    assert len(information) == 1
    assert information[0].startswith("no catchup= and the deployment's default is on")
    assert "each caught-up run writes its own window" in information[0]


def test_implicit_catchup_one_run_at_a_time_over_window_tasks_is_information(tmp_path: Path) -> None:
    findings, information = _catchup(tmp_path, _WINDOW_ENV, ", max_active_runs=1")
    assert findings == []
    assert len(information) == 1


def test_implicit_catchup_over_tasks_taking_no_window_stays_a_finding(tmp_path: Path) -> None:
    findings, information = _catchup(tmp_path, _NO_WINDOW_ENV)
    assert findings == ["IDEM005"]
    assert information == []


def test_implicit_catchup_throttled_over_tasks_taking_no_window_stays_a_finding(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path,
        {
            "dags/reporting/__init__.py": "",
            "dags/reporting/utilities.py": _HELPER,
            "dags/reporting/report.py": _REPORT_DAG.format(env=_NO_WINDOW_ENV, extra=", max_active_runs=1"),
        },
    )
    messages = [f.message for f in seen(report) if f.rule == "IDEM005"]
    assert len(messages) == 1
    assert "max_active_runs=1 throttles it" in messages[0]


#: one pod takes the window, another (the scrape) takes none: left to the default, it stays a finding
_HALF_WINDOW = _REPORT_DAG.replace(
    "        env_vars={env},\n    )\n",
    "        env_vars={env},\n    )\n"
    "    utilities.k8s_operator(dag=dag, task_id='scrape', cmds=['scrape-all'])\n",
)


def test_implicit_catchup_over_a_task_taking_no_window_beside_one_taking_it_stays_a_finding(
    tmp_path: Path,
) -> None:
    report = lint_files(
        tmp_path,
        {
            "dags/reporting/__init__.py": "",
            "dags/reporting/utilities.py": _HELPER,
            "dags/reporting/report.py": _HALF_WINDOW.format(env=_WINDOW_ENV, extra=""),
        },
    )
    assert [f.rule for f in seen(report) if f.rule == "IDEM005"] == ["IDEM005"]


#: the callable takes ``ts`` but never reads it (its uses commented out): it takes no window
_UNREAD_TS = """\
from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator


def load(ts):
    # day = ts[:10]
    return requests_all()


with DAG("planning", schedule_interval="0 3 * * *", start_date=datetime(2024, 7, 1)):
    PythonOperator(task_id="load", python_callable=load)
"""


def test_implicit_catchup_over_a_callable_that_never_reads_its_ts_stays_a_finding(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/planning.py": _UNREAD_TS})
    assert [f.rule for f in seen(report) if f.rule == "IDEM005"] == ["IDEM005"]
    read = lint_files(
        tmp_path / "read", {"dags/planning.py": _UNREAD_TS.replace("return requests_all()", "return ts")}
    )
    assert [f.rule for f in read.findings if f.rule == "IDEM005"] == []


#: one task takes the window, another selects by the clock: a caught-up run loads today's rows
_CLOCK_TASK = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.postgres.operators.postgres import PostgresOperator

dag = DAG("report", schedule_interval="@daily", start_date=datetime(2022, 1, 1))

with dag:
    PostgresOperator(task_id="day", sql="INSERT INTO daily SELECT * FROM src WHERE d = '{{ ds }}'")
    PostgresOperator(task_id="today", sql="INSERT INTO latest SELECT * FROM src WHERE d = CURRENT_DATE")
"""


def test_implicit_catchup_with_a_clock_reading_task_stays_a_finding(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/report.py": _CLOCK_TASK})
    messages = [f.message for f in seen(report) if f.rule == "IDEM005"]
    assert len(messages) == 1
    assert "today" in messages[0]


_EXPORT_HEAD = """\
from datetime import datetime

from airflow.sdk import DAG, task

with DAG("ingest", schedule="@monthly", start_date=datetime(2024, 1, 1), catchup=False):
"""

#: file lines 12 (``now() AS insrt_process_tmstmp``), 14 (``date_format(..)``) and 24 (UPDT..)
_EXPORT = """\
    @task.parquet(
        task_id="extract",
        target="{{ ti.xcom_pull(task_ids='context', key='RUNDIR') }}/snapshot.parquet",
        sql='''
        SELECT
            acct_id,
            now() AS insrt_process_tmstmp,
            balance,
            date_format(current_timestamp, 'yyyy-MM-dd HH:mm:ss') AS instr_process_tmstmp
        FROM src WHERE mth = '{{ ds }}'
        ''',
    )
    def extract():
        pass

    @task.duckdb(
        task_id="load",
        sql='''
        INSERT INTO mart.snapshot BY NAME SELECT *, CURRENT_TIMESTAMP AS UPDT_PROCESS_TMSTMP
        FROM '{{ ti.xcom_pull(task_ids="extract", key="parquet") }}'
        ''',
    )
    def load():
        pass

    extract() >> load()
"""

#: a later task selects the loaded table's rows by the stamp: it is a mark
_READER = """\

    @task.duckdb(
        task_id="increment",
        sql="INSERT INTO mart.feed SELECT * FROM mart.snapshot WHERE insrt_process_tmstmp > '{{ prev_ds }}'",
    )
    def increment():
        pass

    increment()
"""

#: a module no task is made of (a generator loads it by importlib) selects by the stamp
_FEATURE = '''\
def export(sql="""
    SELECT acct_id FROM mart.snapshot
    WHERE insrt_process_tmstmp < last_day(date '{{ ti.xcom_pull(task_ids="context", key="rundate") }}')
"""):
    pass
'''


def _export(
    tmp_path: Path, extra: str = "", files: dict[str, str] | None = None
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    report = lint_files(tmp_path, {"dags/ingest.py": _EXPORT_HEAD + _EXPORT + extra, **(files or {})})
    findings = [(rule, line) for rule, _file, line, _task in seen_rows(report) if rule == "IDEM001"]
    information = sorted((f.rule, f.line) for f in explained(report) if f.rule == "IDEM001")
    return findings, information


def test_a_stamp_on_rows_exported_to_a_file_is_information(tmp_path: Path) -> None:
    findings, information = _export(tmp_path)
    assert findings == []
    assert ("IDEM001", 12) in information
    assert ("IDEM001", 14) in information  # a formatted stamp is the stamp


def test_an_abbreviated_audit_column_is_information_on_an_append(tmp_path: Path) -> None:
    _, information = _export(tmp_path)
    assert ("IDEM001", 24) in information


def test_an_exported_stamp_a_task_selects_by_on_the_loaded_table_stays_a_finding(tmp_path: Path) -> None:
    findings, _ = _export(tmp_path, _READER)
    assert ("IDEM001", 12) in findings


def test_an_exported_stamp_selected_by_in_a_module_no_task_is_made_of_stays_a_finding(
    tmp_path: Path,
) -> None:
    findings, _ = _export(tmp_path, files={"functions/feature.py": _FEATURE})
    assert ("IDEM001", 12) in findings


def test_an_exported_stamp_of_another_table_read_elsewhere_is_information(tmp_path: Path) -> None:
    feature = _FEATURE.replace("mart.snapshot", "mart.customers")
    findings, information = _export(tmp_path, files={"functions/feature.py": feature})
    assert findings == []
    assert ("IDEM001", 12) in information


def test_a_business_date_from_the_clock_on_exported_rows_stays_a_finding(tmp_path: Path) -> None:
    body = _EXPORT.replace("now() AS insrt_process_tmstmp", "now() AS process_date")
    report = lint_files(tmp_path, {"dags/ingest.py": _EXPORT_HEAD + body})
    assert ("IDEM001", 12) in [(r, line) for r, _f, line, _t in seen_rows(report)]


_MARK_HEAD = """\
from datetime import datetime

from airflow.sdk import DAG, task

with DAG("dims", schedule="@monthly", start_date=datetime(2024, 1, 1), catchup=False):
    @task.duckdb(task_id="get_max_id", sql="SELECT MAX(acct_id) FROM mart.acct_dim")
    def get_max_id():
        pass

"""

#: line 14: the MAX numbers the new rows' keys; which rows are new is the anti-join's choice
_NUMBERING = """\
    @task.parquet(
        task_id="new_accts",
        target="new_accts.parquet",
        sql='''
        SELECT {{ ti.xcom_pull(task_ids='get_max_id') }} + ROW_NUMBER() OVER (ORDER BY s.acct_num) AS acct_id,
            s.acct_num
        FROM src AS s LEFT JOIN mart.acct_dim AS d ON s.acct_num = d.acct_num
        WHERE d.acct_num IS NULL
        ''',
    )
    def new_accts():
        pass

    get_max_id() >> new_accts()
"""

#: line 14: the MAX is where the increment starts: a watermark
_WATERMARK = _NUMBERING.replace(
    "SELECT {{ ti.xcom_pull(task_ids='get_max_id') }} + ROW_NUMBER() OVER (ORDER BY s.acct_num) AS acct_id,",
    "SELECT s.acct_id, s.acct_num FROM src AS s WHERE s.acct_id > {{ ti.xcom_pull(task_ids='get_max_id') }}",
)

#: line 14: the producer's file, pulled by key='parquet', read as a file
_FILE_PULL = _NUMBERING.replace(
    "SELECT {{ ti.xcom_pull(task_ids='get_max_id') }} + ROW_NUMBER() OVER (ORDER BY s.acct_num) AS acct_id,",
    "SELECT * FROM '{{ ti.xcom_pull(task_ids='get_max_id', key='parquet') }}' AS m, src AS s WHERE 1 = 1 AND",
)


def _marks(tmp_path: Path, body: str) -> tuple[list[int], list[int]]:
    report = lint_files(tmp_path, {"dags/dims.py": _MARK_HEAD + body})
    findings = [line for rule, _file, line, _task in seen_rows(report) if rule == "IDEM004"]
    information = [f.line for f in explained(report) if f.rule == "IDEM004"]
    return findings, information


def test_a_max_added_to_a_row_number_numbers_keys_and_is_no_watermark(tmp_path: Path) -> None:
    findings, information = _marks(tmp_path, _NUMBERING)
    assert findings == []
    assert information == [14]


def test_a_max_the_increment_starts_at_stays_a_watermark(tmp_path: Path) -> None:
    findings, _ = _marks(tmp_path, _WATERMARK)
    assert findings == [14]


def test_an_xcom_pulled_by_a_key_naming_a_file_is_no_watermark(tmp_path: Path) -> None:
    findings, information = _marks(tmp_path, _FILE_PULL)
    assert findings == []
    assert information == []

"""Round 31c (issue 35, lint41, docs/lint-evaluation.md): a DAG hands a PySpark script of its own
tree to ``SparkSubmitOperator(application=...)`` and the script appends rows to its target table.
The script is the task's code: its append is IDEM002, at the script's line, with the DAG's task id.
An overwrite is no finding, and a path known only at run time is skipped without a crash.
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import finding_rows, lint_files

_DAG = """\
import os
from datetime import datetime

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

SCRIPTS = "/usr/local/airflow/include/spark"

with DAG("sales", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    SparkSubmitOperator(task_id="load_sales", application={application}, conn_id="spark")
"""

_SCRIPT = """\
from pyspark.sql import SparkSession


def main():
    spark = SparkSession.builder.getOrCreate()
    df = spark.read.csv("s3a://bucket/sales.csv", header=True)
    df.write.mode("{mode}").jdbc(url="jdbc:postgresql://db/dw", table="sales", properties={{}})


if __name__ == "__main__":
    main()
"""

_DEPLOYED = '"/usr/local/airflow/include/spark"'

#: the line of ``df.write.mode(..)`` in _SCRIPT, counted by hand
_WRITE_LINE = 7


def test_a_submitted_script_that_appends_is_idem002_at_its_line(tmp_path: Path) -> None:
    files = {
        "dags/sales.py": _DAG.format(application='os.path.join(SCRIPTS, "load_sales.py")'),
        "include/spark/load_sales.py": _SCRIPT.format(mode="append"),
    }
    rows = [r for r in finding_rows(lint_files(tmp_path, files)) if r[0] == "IDEM002"]
    assert rows == [("IDEM002", "load_sales.py", _WRITE_LINE, "load_sales")]


def test_a_script_beside_the_dag_named_by_an_f_string_is_read(tmp_path: Path) -> None:
    files = {
        "dags/sales.py": _DAG.replace(
            '"/usr/local/airflow/include/spark"', "os.path.dirname(__file__)"
        ).format(application='f"{SCRIPTS}/load_sales.py"'),
        "dags/load_sales.py": _SCRIPT.format(mode="append"),
    }
    rows = [r for r in finding_rows(lint_files(tmp_path, files)) if r[0] == "IDEM002"]
    assert rows == [("IDEM002", "load_sales.py", _WRITE_LINE, "load_sales")]


def test_an_overwriting_script_is_no_append(tmp_path: Path) -> None:
    files = {
        "dags/sales.py": _DAG.format(application='os.path.join(SCRIPTS, "load_sales.py")'),
        "include/spark/load_sales.py": _SCRIPT.format(mode="overwrite"),
    }
    rows = [r for r in finding_rows(lint_files(tmp_path, files)) if r[0] == "IDEM002"]
    assert rows == []


def test_a_run_time_application_path_is_skipped(tmp_path: Path) -> None:
    files = {
        "dags/sales.py": _DAG.format(application='"{{ var.value.spark_app }}"'),
        "include/spark/load_sales.py": _SCRIPT.format(mode="append"),
    }
    rows = finding_rows(lint_files(tmp_path, files))
    assert [r for r in rows if r[1] == "load_sales.py"] == []

"""Round 31b (issue 35, lint40, docs/lint-evaluation.md): round 31's batch is tuning data now; the
general shapes behind its false findings, tested with small hand-written DAG files. What each test
asserts is what a reviewer reading the file would say.

- a (IDEM007): a loop over literal rows that builds a task only ``if row[2] == 'HASH_DELTA' and
  row[3] == 'ENABLED'`` makes no task for the other rows: two rows naming one table, one of them
  filtered out, are one writer. Two rows that both pass the filter stay IDEM007, and a test the file
  cannot decide (an environment variable) keeps both branches walked.
- b (IDEM004 -> IDEM003): ``START = now().replace(hour=0).subtract(days=1)`` given only as the DAG's
  ``start_date`` (directly or in ``default_args``) is a start date that moves with the clock, no
  window a task reads. The same value also put into a task's SQL stays IDEM004.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import explained, lint_files, per_task, seen

_LOOP_DAG = """\
from datetime import datetime

import pandas_gbq
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

TABLES = [
    [1, "orders", "HASH_DELTA", "{first}"],
    [2, "customers", "HASH_DELTA", "ENABLED"],
    [3, "orders", "FULL", "DISABLED"],
    [4, "orders", "HASH_DELTA", "ENABLED"],
]


def copy_hashes(table_name):
    pandas_gbq.to_gbq(df, f"stg.hash_{{table_name}}", project_id="p", if_exists="replace")


with DAG("cdc", schedule="0 4 * * *", start_date=datetime(2024, 1, 1), catchup=False):
    for row in TABLES:
        if {test}:
            PythonOperator(
                task_id=f"hash_{{row[0]}}_{{row[1]}}",
                python_callable=copy_hashes,
                op_kwargs={{"table_name": row[1]}},
            )
"""

_FILTER = 'row[2] == "HASH_DELTA" and row[3] == "ENABLED"'


def _writers(report: LintReport) -> list[str | None]:
    return sorted(f.task_id for f in per_task(seen(report)) if f.rule == "IDEM007")


def test_a_rows_a_loop_filters_out_make_no_task(tmp_path: Path) -> None:
    files = {"dags/cdc.py": _LOOP_DAG.format(first="DISABLED", test=_FILTER)}
    assert _writers(lint_files(tmp_path, files)) == []  # only hash_4_orders writes stg.hash_orders


def test_a_guard_two_rows_that_pass_stay_two_writers(tmp_path: Path) -> None:
    files = {"dags/cdc.py": _LOOP_DAG.format(first="ENABLED", test=_FILTER)}
    assert _writers(lint_files(tmp_path, files)) == ["hash_1_orders", "hash_4_orders"]


def test_a_guard_an_undecided_test_keeps_every_row(tmp_path: Path) -> None:
    test = 'os.environ.get("MODE", "x") == row[2]'
    text = "import os\n" + _LOOP_DAG.format(first="DISABLED", test=test)
    # rows 1, 3 and 4 write stg.hash_orders: undecided, every row stays a writer
    assert _writers(lint_files(tmp_path, {"dags/cdc.py": text})) == [
        "hash_1_orders",
        "hash_3_orders",
        "hash_4_orders",
    ]


_START_DAG = """\
import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

START_DATE_LOCAL = (
    pendulum.now("America/Mexico_City").replace(hour=0, minute=0, second=0).subtract(days=1)
)
default_args = {{"owner": "dwh", "start_date": START_DATE_LOCAL}}

with DAG("sell_in", schedule=None, default_args=default_args, catchup=False):
    SQLExecuteQueryOperator(task_id="build", conn_id="bq", sql={sql})
"""


def test_b_a_clock_variable_only_given_as_start_date_is_no_window(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/sell_in.py": _START_DAG.format(sql='"CALL build_sell_in()"')})
    assert [f.rule for f in seen(report) if f.rule == "IDEM004"] == []
    assert [(f.rule, f.line) for f in explained(report) if f.rule == "IDEM003"] == [("IDEM003", 6)]


def test_b_guard_the_same_variable_in_a_window_stays_idem004(tmp_path: Path) -> None:
    sql = "f\"DELETE FROM sales WHERE day >= '{START_DATE_LOCAL}'\""
    report = lint_files(tmp_path, {"dags/sell_in.py": _START_DAG.format(sql=sql)})
    assert [(f.rule, f.line) for f in seen(report) if f.rule == "IDEM004"] == [("IDEM004", 6)]

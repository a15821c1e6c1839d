"""Round 36k of issue 35 (lint77, docs/lint-evaluation.md): severity by shape for the large kinds of
rounds 28-48, each with its counter-shape.

(a) A repository operator whose ``execute`` truncates ``{self.schema}.{self.table}`` (``__init__`` stores
``self.table = table``) empties the table its task's arguments name; a ``S3ToRedshiftOperator`` COPY
into that table (``dw.staging.stage_x``, the database spelt) after it in the same DAG is information.
A truncate of another table leaves the COPY a finding.
(b) A plain clock read (IDEM003) or a window counted back from the clock (IDEM004) in the code of a
task that also takes the run's window (a ``ds`` parameter, a template; not a ``row["ts"]`` subscript) is
information; in a task that takes
no window of the run it stays a finding.
(c) An append into a table whose name says it records each check or version (``cdc_data_verifi_log``,
``products_history``, ``tb_data_verify``) is information; into ``catalog``, ``daily_sales`` or
``etl_audit_log`` it stays.

Lines are counted by hand in the files below. On main b26fbf6 4 of these 8 tests fail; the 4 that pass
there are the counter-shapes, which keep their findings.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import lint_files


def _rows(report: LintReport, rule: str) -> tuple[list[int], list[int]]:
    """Lines of the rule's findings, and of its information."""
    return (
        sorted(f.line for f in report.findings if f.rule == rule),
        sorted(f.line for f in report.information if f.rule == rule),
    )


_TRUNCATE_OP = """\
from airflow.models import BaseOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook


class TruncateTableOperator(BaseOperator):
    def __init__(self, schema, table, conn_id, **kwargs):
        super().__init__(**kwargs)
        self.schema = schema
        self.table = table
        self.conn_id = conn_id

    def execute(self, context):
        PostgresHook(postgres_conn_id=self.conn_id).run(f"TRUNCATE TABLE {self.schema}.{self.table}")
"""

_COPY_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.amazon.aws.transfers.s3_to_redshift import S3ToRedshiftOperator
from plugins.truncate_op import TruncateTableOperator

name = "clicks"
with DAG("stage_clicks", schedule=None, start_date=datetime(2024, 1, 1)) as dag:
    empty = TruncateTableOperator(task_id="empty", schema="staging", table={truncated}, conn_id="rs")
    copy = S3ToRedshiftOperator(
        task_id="copy",
        s3_bucket="bucket",
        s3_key="processed/clicks/",
        schema="dw.staging",
        table=f"stage_{{name}}",
        redshift_conn_id="rs",
    )
    empty >> copy
"""


def _copy_report(tmp_path: Path, truncated: str) -> LintReport:
    files = {
        "plugins/__init__.py": "",
        "plugins/truncate_op.py": _TRUNCATE_OP,
        "dags/stage_clicks.py": _COPY_DAG.format(truncated=truncated),
    }
    return lint_files(tmp_path, files)


def test_copy_into_a_stage_table_a_custom_operator_truncates_is_information(tmp_path: Path) -> None:
    found, info = _rows(_copy_report(tmp_path, 'f"stage_{name}"'), "IDEM002")
    assert found == []
    assert info == [10]


def test_copy_into_a_table_the_custom_operator_does_not_truncate_stays(tmp_path: Path) -> None:
    found, _ = _rows(_copy_report(tmp_path, '"stage_views"'), "IDEM002")
    assert found == [10]


_CLOCK_DAG = """\
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook


def load({args}):
    {window}
    hook = PostgresHook(postgres_conn_id="dwh")
    hook.run("DELETE FROM dw.visits WHERE day = %s", parameters=(day,))
    hook.run("INSERT INTO dw.visits SELECT * FROM raw.visits WHERE day = %s", parameters=(day,))
    {clock}
    hook.run("INSERT INTO dw.load_log (task, note) VALUES ('load', %s)", parameters=(marker,))


with DAG("visits", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False) as dag:
    PythonOperator(task_id="load", python_callable=load)
"""
_RUN_DAY = "day = ds"
_CLOCK_DAY = 'day = datetime.now().strftime("%Y-%m-%d")'
_PLAIN = "marker = datetime.now()"
_SHIFTED = "marker = datetime.now() - timedelta(days=1)"


def _clock_report(tmp_path: Path, window: str, clock: str) -> LintReport:
    """The task names ``ds`` as a parameter when `window` takes it (a ``row["ts"]`` subscript alone
    is no run window: round 36k)."""
    args = "ds" if window == _RUN_DAY else "**context"
    text = _CLOCK_DAG.format(args=args, window=window, clock=clock)
    return lint_files(tmp_path, {"dags/visits.py": text})


def test_clock_read_beside_the_run_window_is_information(tmp_path: Path) -> None:
    report = _clock_report(tmp_path, _RUN_DAY, _PLAIN)
    found, info = _rows(report, "IDEM003")
    assert found == []
    assert info == [13]
    message = next(f.message for f in report.information if f.rule == "IDEM003" and f.line == 13)
    assert "the task takes the run's window too" in message


def test_clock_window_beside_the_run_window_is_information(tmp_path: Path) -> None:
    found, info = _rows(_clock_report(tmp_path, _RUN_DAY, _SHIFTED), "IDEM004")
    assert found == []
    assert info == [13]


def test_clock_read_of_a_task_without_a_run_window_stays(tmp_path: Path) -> None:
    found, _ = _rows(_clock_report(tmp_path, _CLOCK_DAY, "marker = 'x'"), "IDEM003")
    assert found == [9]


def test_clock_window_of_a_task_without_a_run_window_stays(tmp_path: Path) -> None:
    found, _ = _rows(_clock_report(tmp_path, "day = 'x'", _SHIFTED), "IDEM004")
    assert found == [13]


_APPEND_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.postgres.operators.postgres import PostgresOperator

with DAG("loads", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False) as dag:
    PostgresOperator(
        task_id="load",
        postgres_conn_id="dwh",
        sql="INSERT INTO {table} SELECT * FROM raw.events WHERE day = '{{{{ ds }}}}'",
    )
"""


def test_append_into_a_log_or_history_table_is_information(tmp_path: Path) -> None:
    for table in ("ops.cdc_data_verifi_log", "core.products_history", "config.tb_data_verify"):
        report = lint_files(tmp_path / table, {"dags/loads.py": _APPEND_DAG.format(table=table)})
        found, info = _rows(report, "IDEM002")
        assert (found, info) == ([], [10]), table


def test_append_into_a_data_table_stays(tmp_path: Path) -> None:
    for table in ("shop.catalog", "dw.daily_sales", "ops.etl_audit_log"):
        report = lint_files(tmp_path / table, {"dags/loads.py": _APPEND_DAG.format(table=table)})
        found, _ = _rows(report, "IDEM002")
        assert found == [10], table

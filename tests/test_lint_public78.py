"""Round 36l of issue 35 (lint78, docs/lint-evaluation.md): two shapes of rounds 28-48's missed problems,
each with its counter-shape.

(d) A ``LatestOnlyOperator`` in the middle of a DAG whose catchup is on (or a backfill DAG bounded by an
end_date): the tasks before it run in every caught-up run, the ones after it only in the latest, so a
task after it that takes the run's window or the XCom of a task before it never processes the
caught-up windows (IDEM005). Not raised: the gate at the root (round 34b: information), the tasks
after the gate take nothing of the run (a report of the whole table) or only the XCom of another
task after it, catchup off, a trigger rule that runs after a skip.
(f) clickhouse-connect's ``insert_file(client, table, path)`` and ``client.insert_df(table, df)``
append (IDEM002): into a ``_tmp`` table made IF NOT EXISTS and renamed over the target, a rerun after a
failure between the insert and the rename doubles the rows. Not raised: the ``_tmp`` table dropped
first in the same task (an f-string naming both).

Lines are counted by hand in the files below. On b26fbf6 (this round's base) 7 of these 12 tests
fail; the 5 that pass there are counter-shapes (the one fed by another skipped task fails there on its
second half, a task fed by the extract).
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


_GATED = """\
from datetime import datetime

from airflow import DAG
from airflow.operators.latest_only import LatestOnlyOperator
from airflow.providers.amazon.aws.operators.glue import GlueJobOperator
from airflow.providers.amazon.aws.transfers.http_to_s3 import HttpToS3Operator

with DAG(
    "orders",
    schedule="@hourly",
    start_date=datetime(2024, 1, 1),
    {bound}catchup={catchup},
) as dag:
    extract = HttpToS3Operator(
        task_id="extract",
        http_conn_id="shop",
        endpoint="orders",
        s3_bucket="raw",
        s3_key="orders/{{{{ ds }}}}/{{{{ ts_nodash }}}}.json",
    )
    latest = LatestOnlyOperator(task_id="latest")
    transform = GlueJobOperator(
        task_id="transform",
        job_name="flatten_orders",
        script_args={{"--files": {files}}},{rule}
    )
    {edges}
"""
# catchup= is on line 13 with `bound` empty, line 14 with an end_date line


def _gated(
    catchup: str = "True",
    bound: str = "",
    files: str = "\"{{ ti.xcom_pull(task_ids='extract') }}\"",
    rule: str = "",
    edges: str = "extract >> latest >> transform",
) -> str:
    return _GATED.format(catchup=catchup, bound=bound, files=files, rule=rule, edges=edges)


def test_latest_only_between_extract_and_transform_with_catchup_is_raised(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/orders.py": _gated()})
    found, info = _rows(report, "IDEM005")
    assert found == [12]
    assert info == []
    message = next(f.message for f in report.findings if f.rule == "IDEM005")
    assert "transform runs after latest, a LatestOnlyOperator with tasks before it" in message


def test_latest_only_in_a_backfill_dag_bounded_by_an_end_date_is_raised(tmp_path: Path) -> None:
    dag = _gated(bound="end_date=datetime(2024, 6, 1),\n    ")
    found, _ = _rows(lint_files(tmp_path, {"dags/orders.py": dag}), "IDEM005")
    assert found == [13]


def test_transform_taking_the_run_window_after_the_gate_is_raised(tmp_path: Path) -> None:
    found, _ = _rows(lint_files(tmp_path, {"dags/orders.py": _gated(files='"{{ ds }}"')}), "IDEM005")
    assert found == [12]


def test_catchup_left_to_airflow_2_default_is_raised_too(tmp_path: Path) -> None:
    dag = _gated().replace("    catchup=True,\n", "")
    dag = dag.replace('schedule="@hourly"', 'schedule_interval="@hourly"')
    report = lint_files(tmp_path, {"dags/orders.py": dag})
    messages = [f.message for f in report.findings if f.rule == "IDEM005"]
    assert len(messages) == 1
    assert "transform runs after latest, a LatestOnlyOperator with tasks before it" in messages[0]


def test_latest_only_at_the_root_stays_information(tmp_path: Path) -> None:
    dag = _gated(edges="latest >> extract >> transform")
    found, info = _rows(lint_files(tmp_path, {"dags/orders.py": dag}), "IDEM005")
    assert found == []
    assert info == [12]


def test_tasks_after_the_gate_taking_nothing_of_the_run_are_not_raised(tmp_path: Path) -> None:
    found, _ = _rows(lint_files(tmp_path, {"dags/orders.py": _gated(files='"s3://raw/orders/"')}), "IDEM005")
    assert found == []


def test_task_after_the_gate_fed_only_by_another_skipped_task_is_not_raised(tmp_path: Path) -> None:
    edges = (
        'load = GlueJobOperator(task_id="load", job_name="load_orders", '
        'script_args={"--files": "{{ ti.xcom_pull(task_ids=\'transform\') }}"})\n'
        "    extract >> latest >> transform >> load"
    )
    dag = _gated(files='"s3://raw/orders/"', edges=edges)
    found, _ = _rows(lint_files(tmp_path, {"dags/orders.py": dag}), "IDEM005")
    assert found == []
    pulled = edges.replace("task_ids='transform'", "task_ids='extract'")
    fed = _gated(files='"s3://raw/orders/"', edges=pulled)
    found, _ = _rows(lint_files(tmp_path / "fed", {"dags/orders.py": fed}), "IDEM005")
    assert found == [12]


def test_gate_with_catchup_off_is_not_raised(tmp_path: Path) -> None:
    found, info = _rows(lint_files(tmp_path, {"dags/orders.py": _gated(catchup="False")}), "IDEM005")
    assert found == info == []


def test_task_after_the_gate_that_runs_after_a_skip_is_not_raised(tmp_path: Path) -> None:
    dag = _gated(rule='\n        trigger_rule="none_failed",')
    found, _ = _rows(lint_files(tmp_path, {"dags/orders.py": dag}), "IDEM005")
    assert found == []


_CLICKHOUSE = """\
from datetime import datetime

from airflow.decorators import dag, task
from clickhouse_connect import get_client
from clickhouse_connect.driver.tools import insert_file


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
def geocode():
    @task
    def load(path: str):
        client = get_client(host="dwh")
        {prepare}
        insert_file(client, {table}, path, database="raw", fmt="CSVWithNames")
        client.command("DROP TABLE IF EXISTS raw.companies")
        client.command("RENAME TABLE raw.companies_tmp TO raw.companies")

    load("/tmp/companies.csv")


geocode()
"""
# insert_file( is on line 14

_CREATE = (
    'client.command("CREATE TABLE IF NOT EXISTS raw.companies_tmp (siret String) '
    'ENGINE = MergeTree ORDER BY siret")'
)


def test_insert_file_into_a_tmp_table_made_if_not_exists_is_an_append(tmp_path: Path) -> None:
    dag = _CLICKHOUSE.format(prepare=_CREATE, table='"companies_tmp"')
    report = lint_files(tmp_path, {"dags/geocode.py": dag})
    found, _ = _rows(report, "IDEM002")
    assert found == [14]
    message = next(f.message for f in report.findings if f.rule == "IDEM002")
    assert "insert_file(raw.companies_tmp)" in message


def test_insert_file_into_a_tmp_table_dropped_first_is_not_raised(tmp_path: Path) -> None:
    drop = 'client.command(f"DROP TABLE IF EXISTS raw.{name}_tmp")'
    prepare = f'name = path.rsplit("/", 1)[-1]\n        {drop}\n        {_CREATE}'
    dag = _CLICKHOUSE.format(prepare=prepare, table='f"raw.{name}_tmp"')
    found, _ = _rows(lint_files(tmp_path, {"dags/geocode.py": dag}), "IDEM002")
    assert found == []


def test_insert_df_of_a_client_appends(tmp_path: Path) -> None:
    dag = _CLICKHOUSE.format(prepare="frame = None", table='"companies_tmp"').replace(
        'insert_file(client, "companies_tmp", path, database="raw", fmt="CSVWithNames")',
        'client.insert_df("raw.events", frame)',
    )
    found, _ = _rows(lint_files(tmp_path, {"dags/geocode.py": dag}), "IDEM002")
    assert found == [14]

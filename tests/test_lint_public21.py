"""Round 20b (issue 35, docs/lint-evaluation.md): a DAG factory's own ``DAG(..)`` call decides the
DAG's catchup, tested with a small project of hand-written files. blockchain-etl's DAG files call
factories (``DAG = build_amend_dag(..)``) whose ``models.DAG(dag_id, catchup=False, ..)`` the linter
did not read: five "no catchup=" findings on DAGs that never catch up. What each test asserts is what
a reviewer reading the two files would say:

- ``catchup=False`` written in the factory's ``DAG(..)``: no catchup, no finding;
- ``catchup=<parameter>``: the call's argument for it, else its default;
- a parameter the call may set through a ``**mapping`` the linter cannot read: unknown, not judged;
- no ``catchup=`` anywhere on an Airflow 2 DAG (``schedule_interval=``): the deployment's default,
  on: the finding stays, at the factory's call;
- ``catchup=True`` written in the factory over a task that takes no window: a finding at the call
  that says the catchup is chosen, not defaulted.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import lint_paths

_FACTORY = """\
from datetime import datetime

from airflow import models
from airflow.providers.standard.operators.bash import BashOperator


def build_dag(dag_id, schedule_interval="0 0 * * *", catchup_on=False, start=datetime(2018, 7, 1)):
    dag = models.DAG(dag_id, {catchup}schedule_interval=schedule_interval, start_date=start)
    BashOperator(task_id="export", bash_command="export.sh", dag=dag)
    return dag
"""

_DAG = """\
from factories.build import build_dag
from factories.settings import read_vars

DAG = build_dag({arguments})  # airflow DAG
"""


def _catchup(tmp_path: Path, catchup: str, arguments: str = "'export'") -> list[tuple[int, str]]:
    (tmp_path / "factories").mkdir()
    (tmp_path / "factories" / "__init__.py").write_text("")
    (tmp_path / "factories" / "build.py").write_text(_FACTORY.format(catchup=catchup))
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "export.py").write_text(_DAG.format(arguments=arguments))
    report = lint_paths([tmp_path])
    assert any(f.endswith("export.py") for f in report.files), report.files  # not vacuous
    return [(f.line, f.message) for f in report.findings if f.rule == "IDEM005"]


def test_catchup_false_written_in_the_factory_is_read(tmp_path: Path) -> None:
    assert _catchup(tmp_path, "catchup=False, ") == []


def test_catchup_bound_to_a_factory_parameter_takes_the_call_argument(tmp_path: Path) -> None:
    assert _catchup(tmp_path, "catchup=catchup_on, ", "'export', catchup_on=False") == []


def test_a_parameter_an_unread_mapping_may_set_is_not_judged(tmp_path: Path) -> None:
    assert _catchup(tmp_path, "catchup=catchup_on, ", "'export', **read_vars()") == []


def test_no_catchup_anywhere_on_airflow_2_stays_a_finding_at_the_call(tmp_path: Path) -> None:
    found = _catchup(tmp_path, "")
    assert [line for line, _ in found] == [4], found
    assert "no catchup= and the deployment's default is on" in found[0][1]


def test_catchup_true_written_in_the_factory_is_a_chosen_catchup(tmp_path: Path) -> None:
    found = _catchup(tmp_path, "catchup=True, ")
    assert [line for line, _ in found] == [4], found
    assert "no catchup=" not in found[0][1], found


_LOGGED = """\
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

with DAG(dag_id="report", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def note():
        {assign} (datetime.now() - timedelta(days=7)).isoformat()
        print(f"checked since {{since}}")

    note()
"""


def _window_lines(tmp_path: Path, assign: str) -> list[int]:
    path = tmp_path / "report.py"
    path.write_text(_LOGGED.format(assign=assign))
    report = lint_paths([path])
    assert report.files, report  # not vacuous
    return [f.line for f in report.findings if f.rule == "IDEM004"]


def test_a_span_only_printed_is_no_window_with_or_without_an_annotation(tmp_path: Path) -> None:
    """One walker (`textuse.value_ends`) follows ``since = ..`` and ``since: str = ..`` alike: the
    shifted clock only dates a printed line, so it reads no window."""
    assert _window_lines(tmp_path, "since =") == []
    assert _window_lines(tmp_path, "since: str =") == []


_MAPPED = """\
from datetime import datetime

from airflow.models import BaseOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook
from airflow.sdk import DAG


class CopyOperator(BaseOperator):
    def __init__(self, source, **kwargs):
        super().__init__(**kwargs)
        self.source = source

    def execute(self, context):
        PostgresHook().run("INSERT INTO events SELECT * FROM staging")


with DAG(dag_id="copies", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False):
    {task}
"""


def _appends(tmp_path: Path, task: str) -> list[tuple[str, str | None]]:
    path = tmp_path / "copies.py"
    path.write_text(_MAPPED.format(task=task))
    report = lint_paths([path])
    return [(f.rule, f.task_id) for f in report.findings if f.rule == "IDEM002"]


def test_a_mapped_own_operator_is_judged_by_its_execute_like_a_plain_one(tmp_path: Path) -> None:
    """``Op.partial(..).expand(..)`` runs the same ``execute`` as ``Op(..)``: its INSERT into
    ``events`` (no delete, no key) appends again on a rerun, mapped or not."""
    plain = _appends(tmp_path, 'CopyOperator(task_id="copy", source="a")')
    assert plain == [("IDEM002", "copy")], plain
    mapped = _appends(tmp_path, 'CopyOperator.partial(task_id="copy").expand(source=["a", "b"])')
    assert mapped == [("IDEM002", "copy")], mapped

"""Round 35b (issue 35, lint52, docs/lint-evaluation.md): what round 35's fresh batch showed the linter
did not follow, each as a small project written here (no repository's code):

- a custom operator imported through its package's ``__init__`` (``from pulls.operators import
  ActiveUsersOperator``) whose ``execute`` calls ``self._upload(..)`` written in a base class of another
  module: the inherited method is the task's code (a random object name under the run's partition:
  IDEM003), also when the base is named by its module (``class Op(base.PullBaseOperator)``) and when a
  repository function handed ``task_id=`` makes the operator (``return Op(task_id=task_id, ..)``);
- ``Cls.run(..)`` of a ``@classmethod`` a base class defines, whose ``cls(..)`` makes the subclass's
  object: the subclass's methods are the task's code;
- ``@task(templates_exts=[".sql"])`` handed a ``.sql`` file name (Airflow renders it to the file's
  text) and run by a client's ``.query(sql)``: the file's SQL is the task's;
- a DAG whose schedule and end_date a repository helper picks per environment
  (``set_env_value(production="@daily", dev="@once")``, ``end_date=set_env_value(production=None,
  dev=None)``) with ``catchup=True`` over a task that reads a relative window: IDEM005.

Each has a counter-shape that stays quiet.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import finding_rows, lint_files


def _line(text: str, marker: str) -> int:
    """The 1-based line of the one line of `text` holding `marker` (counted here, not by the linter)."""
    (line,) = [n for n, row in enumerate(text.splitlines(), 1) if marker in row]
    return line


_BASE = """\
import uuid

from airflow.models.baseoperator import BaseOperator
from airflow.providers.google.cloud.hooks.gcs import GCSHook


class PullBaseOperator(BaseOperator):
    template_fields = ("ds",)

    def __init__(self, ds, **kwargs):
        super().__init__(**kwargs)
        self.ds = ds

    def execute(self, context):
        raise NotImplementedError

    def _upload(self, data):
        GCSHook().upload(
            bucket_name="raw",
            object_name=f"snapshot_date={self.ds}/{NAME}.parquet",
            data=data,
        )
"""

_ACTIVE = """\
import requests

from {import_line}


class ActiveUsersOperator({base}):
    def execute(self, context):
        rows = requests.get("https://api.example.com/active", params={{"date": self.ds}}).json()
        self._upload(rows)
"""

_DAG = """\
from datetime import datetime

from airflow import DAG
from pulls.operators import ActiveUsersOperator

with DAG("pulls", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    ActiveUsersOperator(task_id="active_users", ds="{{ ds }}")
"""


def _operator_project(name: str, import_line: str, base: str) -> dict[str, str]:
    return {
        "dags/pulls/__init__.py": "",
        "dags/pulls/operators/__init__.py": "from .active import ActiveUsersOperator\n",
        "dags/pulls/operators/base.py": _BASE.replace("{NAME}", name),
        "dags/pulls/operators/active.py": _ACTIVE.format(import_line=import_line, base=base),
        "dags/pulls_dag.py": _DAG,
    }


_BY_NAME = ("pulls.operators.base import PullBaseOperator", "PullBaseOperator")
_BY_MODULE = ("pulls.operators import base", "base.PullBaseOperator")


def test_an_inherited_upload_under_a_random_name_is_the_tasks_code(tmp_path: Path) -> None:
    """The operator is imported through the package's ``__init__``; its base writes the name."""
    report = lint_files(tmp_path, _operator_project("{uuid.uuid4()}", *_BY_NAME))
    line = _line(_BASE, "object_name=")
    assert finding_rows(report) == [("IDEM003", "base.py", line, "active_users")]


def test_a_base_named_by_its_module_is_followed_too(tmp_path: Path) -> None:
    report = lint_files(tmp_path, _operator_project("{uuid.uuid4()}", *_BY_MODULE))
    line = _line(_BASE, "object_name=")
    assert finding_rows(report) == [("IDEM003", "base.py", line, "active_users")]


def test_an_inherited_upload_under_a_fixed_name_stays_quiet(tmp_path: Path) -> None:
    report = lint_files(tmp_path, _operator_project("active_users", *_BY_NAME))
    assert finding_rows(report) == []
    (task,) = report.tasks
    assert task.operator == "ActiveUsersOperator"


_FACTORY = """\
from pulls.operators import ActiveUsersOperator


def make_active_users_task(ds, task_id, bucket):
    return ActiveUsersOperator(task_id=task_id, ds=ds)
"""

_FACTORY_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.utils.task_group import TaskGroup
from pulls.tasks import make_active_users_task

with DAG("pulls", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    with TaskGroup("usage"):
        make_active_users_task(ds="{{ ds }}", task_id="active_users", bucket="raw")
"""


def test_a_function_handed_task_id_that_makes_the_operator_is_a_task_factory(tmp_path: Path) -> None:
    files = _operator_project("{uuid.uuid4()}", *_BY_NAME)
    files["dags/pulls/tasks.py"] = _FACTORY
    files["dags/pulls_dag.py"] = _FACTORY_DAG
    report = lint_files(tmp_path, files)
    assert finding_rows(report) == [
        ("IDEM003", "base.py", _line(_BASE, "object_name="), "usage.active_users")
    ]
    (task,) = report.tasks
    assert (task.operator, Path(task.file).name, task.line) == (
        "ActiveUsersOperator",
        "tasks.py",
        _line(_FACTORY, "return ActiveUsersOperator"),
    )


_NOT_A_FACTORY_DAG = """\
from datetime import datetime

from airflow import DAG
from pulls.tasks import send_report

with DAG("pulls", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    send_report(task_id="report", channel="#data")
"""


def test_a_function_handed_task_id_that_makes_no_operator_stands_as_before(tmp_path: Path) -> None:
    """A helper whose body makes no task is still read as the call it is (an unknown operator)."""
    helper = "def send_report(task_id, channel):\n    return f'{task_id} to {channel}'\n"
    report = lint_files(
        tmp_path,
        {"dags/pulls/__init__.py": "", "dags/pulls/tasks.py": helper, "dags/d.py": _NOT_A_FACTORY_DAG},
    )
    assert [(t.task_id, t.operator) for t in report.tasks] == [("report", "send_report")]


_CLASSMETHOD_BASE = """\
class Extract:
    def __init__(self, account, ds=None):
        self.account = account
        self.ds = ds

    def pull(self):
        return []

    @classmethod
    def airflow_callable(cls, account, **kwargs):
        job = cls(account, **kwargs)
        job.upload(job.pull())
"""

_CLASSMETHOD_SUB = """\
import uuid

from airflow.providers.google.cloud.hooks.gcs import GCSHook

from social.base import Extract


class ProfileLookup(Extract):
    def upload(self, rows):
        GCSHook().upload(bucket_name="raw", object_name=f"snapshot_date={self.ds}/{NAME}", data=rows)
"""

_CLASSMETHOD_DAG = """\
from datetime import datetime

from airflow.decorators import task
from airflow import DAG
from social import ProfileLookup

with DAG("social", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):

    @task
    def profile(**kwargs):
        ProfileLookup.airflow_callable("sipher", ds=kwargs["ds"])

    profile()
"""


def _classmethod_project(name: str) -> dict[str, str]:
    return {
        "dags/social/__init__.py": "from .lookup import ProfileLookup\n",
        "dags/social/base.py": _CLASSMETHOD_BASE,
        "dags/social/lookup.py": _CLASSMETHOD_SUB.replace("{NAME}", name),
        "dags/social_dag.py": _CLASSMETHOD_DAG,
    }


def test_a_base_class_method_runs_the_subclass_methods_of_the_object_it_makes(tmp_path: Path) -> None:
    report = lint_files(tmp_path, _classmethod_project("{uuid.uuid4()}"))
    assert finding_rows(report) == [
        ("IDEM003", "lookup.py", _line(_CLASSMETHOD_SUB, "object_name="), "profile")
    ]


def test_a_base_class_method_whose_subclass_writes_a_fixed_name_stays_quiet(tmp_path: Path) -> None:
    assert finding_rows(lint_files(tmp_path, _classmethod_project("profile.json"))) == []


_ALERT_DAG = """\
from datetime import datetime

from airflow import DAG, settings
from airflow.decorators import task
from alerting.check import queue_new_rows

with DAG(
    "alerts",
    schedule="*/15 * * * *",
    start_date=datetime(2024, 1, 1),
    catchup=False,
    template_searchpath=[settings.DAGS_FOLDER + "/alerting/query"],
):

    @task({exts})
    def check_new_rows(query):
        queue_new_rows(query)

    check_new_rows(query="check_new_rows.sql")
"""

_ALERT_HELPER = """\
from google.cloud import bigquery


def queue_new_rows(query):
    bigquery.Client().query(query).result()
"""

_CLOCK_SQL = """\
MERGE alerts.pending t
USING (
    SELECT tx_hash FROM wallet.transactions
    WHERE created_at > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 5 MINUTE)
) s ON t.tx_hash = s.tx_hash
WHEN NOT MATCHED THEN INSERT ROW
"""

_RUN_SQL = """\
MERGE alerts.pending t
USING (
    SELECT tx_hash FROM wallet.transactions
    WHERE created_at >= TIMESTAMP('{{ data_interval_start }}')
      AND created_at < TIMESTAMP('{{ data_interval_end }}')
) s ON t.tx_hash = s.tx_hash
WHEN NOT MATCHED THEN INSERT ROW
"""


def _alert_project(exts: str, sql: str) -> dict[str, str]:
    return {
        "dags/alerting/__init__.py": "",
        "dags/alerting/check.py": _ALERT_HELPER,
        "dags/alerting/query/check_new_rows.sql": sql,
        "dags/alerting/alerts.py": _ALERT_DAG.format(exts=exts),
    }


def _on_sql(report: LintReport) -> list[tuple[str, int, str | None]]:
    """Findings and information reported on the SQL file: (rule, line, task)."""
    return sorted(
        (f.rule, f.line, f.task_id)
        for f in [*report.findings, *report.information]
        if f.file.endswith(".sql")
    )


def test_a_sql_file_a_task_renders_and_runs_through_a_clients_query_is_its_sql(tmp_path: Path) -> None:
    report = lint_files(tmp_path, _alert_project('templates_exts=[".sql"]', _CLOCK_SQL))
    line = _line(_CLOCK_SQL, "CURRENT_TIMESTAMP")
    assert finding_rows(report) == [("IDEM004", "check_new_rows.sql", line, "check_new_rows")]


def test_a_rendered_sql_file_over_the_runs_window_stays_quiet(tmp_path: Path) -> None:
    report = lint_files(tmp_path, _alert_project('templates_exts=[".sql"]', _RUN_SQL))
    assert finding_rows(report) == [] and _on_sql(report) == []


def test_a_file_name_without_templates_exts_is_not_rendered(tmp_path: Path) -> None:
    """Airflow renders the name only when the task declares the extension: the code gets the name."""
    report = lint_files(tmp_path, _alert_project("", _CLOCK_SQL))
    assert finding_rows(report) == [] and _on_sql(report) == []


_STAKING_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.google.cloud.operators.bigquery import BigQueryExecuteQueryOperator
from utils.common import set_env_value

default_args = {{
    "start_date": set_env_value(production=datetime(2022, 11, 3), dev=datetime(2022, 11, 3)),
    "end_date": set_env_value(production={end}, dev=None),
}}

with DAG(
    dag_id="staking",
    default_args=default_args,
    schedule_interval=set_env_value(production={schedule}, dev="@once"),
    catchup=True,
) as dag:
    BigQueryExecuteQueryOperator(
        task_id="staking_transactions",
        use_legacy_sql=False,
        sql=\"\"\"
            MERGE staking.transactions t USING (
                SELECT * FROM chain.transfers
                WHERE DATE(block_timestamp) >= DATE_SUB(CURRENT_DATE(), INTERVAL 2 DAY)
            ) s ON t.tx_hash = s.tx_hash
            WHEN NOT MATCHED THEN INSERT ROW
        \"\"\",
    )
"""

_SET_ENV_VALUE = """\
from airflow.models import Variable


def set_env_value(production, dev):
    environment = Variable.get("execution_environment", default_var="dev")
    return production if environment == "production" else dev
"""


def _staking_report(tmp_path: Path, end: str = "None", schedule: str = '"@daily"') -> tuple[list[int], str]:
    dag = _STAKING_DAG.format(end=end, schedule=schedule)
    files = {"dags/utils/__init__.py": "", "dags/utils/common.py": _SET_ENV_VALUE, "dags/staking.py": dag}
    report = lint_files(tmp_path, files)
    return [line for rule, _name, line, _task in finding_rows(report) if rule == "IDEM005"], dag


def test_catchup_over_a_clock_window_with_a_schedule_chosen_per_environment_is_idem005(
    tmp_path: Path,
) -> None:
    found, dag = _staking_report(tmp_path)
    assert found == [_line(dag, "catchup=True")]


def test_an_end_date_given_in_production_bounds_the_backlog(tmp_path: Path) -> None:
    assert _staking_report(tmp_path, end="datetime(2023, 1, 1)")[0] == []


def test_a_schedule_chosen_between_once_and_none_creates_no_windows(tmp_path: Path) -> None:
    assert _staking_report(tmp_path, schedule="None")[0] == []


_HIDDEN_TASKS_DAG = """\
from datetime import datetime

from airflow import DAG
from costs.groups import UnityCostTaskGroup

with DAG("costs", schedule="@daily", start_date=datetime(2023, 11, 13), catchup=True):
    UnityCostTaskGroup(group_id="unity")
"""


def test_explicit_catchup_over_tasks_the_linter_cannot_see_is_information(tmp_path: Path) -> None:
    """A TaskGroup class makes the tasks in its ``__init__``: the linter sees none, so it cannot say
    that no task takes the run's window (the catalog's explicit case needs the tasks)."""
    group = (
        "from airflow.utils.task_group import TaskGroup\n\n\nclass UnityCostTaskGroup(TaskGroup):\n    pass\n"
    )
    files = {
        "dags/costs/__init__.py": "",
        "dags/costs/groups.py": group,
        "dags/costs_dag.py": _HIDDEN_TASKS_DAG,
    }
    report = lint_files(tmp_path, files)
    assert [f.rule for f in report.findings] == []
    assert [(f.rule, f.line) for f in report.information if f.rule == "IDEM005"] == [
        ("IDEM005", _line(_HIDDEN_TASKS_DAG, "catchup=True"))
    ]

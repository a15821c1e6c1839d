"""The linter's round-18 changes (issue 35, docs/lint-evaluation.md), from round 18's fresh batch
and the gaps round 17 left, tested with a few hand-written lines; what each test asserts is what a
reviewer would say of the snippet, worked out by hand:

- a repository's own operator named like an HTTP sender is judged by the verbs its code sends
  (Amsterdam's ``HttpFetchOperator`` runs ``HttpHook(method="GET")``), found in Airflow's
  ``plugins`` folder, which Airflow puts on the import path;
- a custom operator's ``if self.flag:`` branch the task never takes is not its code;
- a ``start_date`` of ``default_args`` imported from another module and merged or copied
  (``default_args | {..}``, ``.copy()``, ``{**default_args}``) that moves with the clock bounds
  catchup: information, not IDEM005;
- ``combine(date.today(), t) + timedelta(..)).time()`` keeps only a time of day: no window;
- ``SET pdf = 'https://..' || pdf`` grows the column from its own value: IDEM008;
- ``knack.get_date_filter_arg()`` (a ``@task`` of an imported module called as its attribute) is a
  task, and an imported ``@task``'s line is its ``def`` in the module it is reported in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_idempotent.lint import RuleFinding
from tests.lintfiles import lint_files, seen


def _at(entries: list[RuleFinding], rule: str) -> list[tuple[str, int, str | None, str | None]]:
    return sorted((Path(f.file).name, f.line, f.dag_id, f.task_id) for f in entries if f.rule == rule)


def _fetch_operator(verb: str) -> str:
    return (
        "from airflow.models import BaseOperator\n"  # 1
        "from airflow.providers.http.hooks.http import HttpHook\n"
        "class HttpFetchOperator(BaseOperator):\n"  # 3
        "    def __init__(self, endpoint, **kwargs):\n"
        "        super().__init__(**kwargs)\n"  # 5
        "        self.endpoint = endpoint\n"
        "    def execute(self, context):\n"  # 7
        f"        http = HttpHook(http_conn_id='api', method='{verb}')\n"
        "        return http.run(self.endpoint).text\n"  # 9
    )


_FETCH_DAG = (
    "from datetime import datetime\n"  # 1
    "from airflow import DAG\n"
    "from http_fetch_operator import HttpFetchOperator\n"  # 3
    "with DAG('fetch', schedule=None, start_date=datetime(2024, 1, 1), default_args={'retries': 1}):\n"
    "    HttpFetchOperator(task_id='download', endpoint='/data.json')\n"  # 5
)


@pytest.mark.parametrize(("verb", "sends"), [("GET", []), ("POST", [("fetch.py", 5, "fetch", "download")])])
def test_own_http_operator_is_judged_by_the_verb_it_sends(
    tmp_path: Path, verb: str, sends: list[tuple[str, int, str, str]]
) -> None:
    files = {"src/plugins/http_fetch_operator.py": _fetch_operator(verb), "src/dags/fetch.py": _FETCH_DAG}
    assert _at(seen(lint_files(tmp_path, files)), "IDEM006") == sends


_GRANTS = (
    "import pendulum\n"  # 1
    "from datetime import timedelta\n"
    "from airflow.models import BaseOperator\n"  # 3
    "class GrantsOperator(BaseOperator):\n"
    "    def __init__(self, batch_ind: bool = False, **kwargs):\n"  # 5
    "        super().__init__(**kwargs)\n"
    "        self.batch_ind = batch_ind\n"  # 7
    "    def execute(self, context):\n"
    "        if self.batch_ind:\n"  # 9
    "            since = pendulum.now() - timedelta(minutes=30)\n"
    "            return grant_runs_since(since)\n"  # 11
    "        return grant_all()\n"
)


def _grants_dag(batch: str) -> str:
    return (
        "from datetime import datetime\n"  # 1
        "from airflow import DAG\n"
        "from grants_operator import GrantsOperator\n"  # 3
        "with DAG('g', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        f"    GrantsOperator(task_id='grants'{batch})\n"  # 5
    )


def test_a_self_flag_branch_the_task_never_takes_is_not_its_code(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"plugins/grants_operator.py": _GRANTS, "dags/g.py": _grants_dag("")})
    assert _at(report.findings, "IDEM004") == []
    batch = lint_files(
        tmp_path / "b", {"plugins/grants_operator.py": _GRANTS, "dags/g.py": _grants_dag(", batch_ind=True")}
    )
    assert _at(batch.findings, "IDEM004") == [("grants_operator.py", 10, "g", "grants")]


_COMMON = (
    "import pendulum\n"  # 1
    "from datetime import timedelta\n"
    "default_args = {\n"  # 3
    "    'owner': 'data',\n"
    "    'start_date': pendulum.yesterday('Europe/Amsterdam'),\n"  # 5
    "    'retries': 1,\n"
    "    'catchup': False,\n"  # 7: ignored by the DAG, as Airflow ignores it
    "}\n"
    "copied = default_args.copy()\n"  # 9
)


def _catchup_dag(dag_id: str, args: str) -> str:
    return (
        "from airflow import DAG\n"  # 1
        "from airflow.operators.bash import BashOperator\n"
        "from common import default_args, copied\n"  # 3
        f"with DAG('{dag_id}', default_args={args}, schedule_interval='0 2 * * *'):\n"
        "    BashOperator(task_id='t', bash_command='true')\n"  # 5
    )


def test_an_imported_moving_start_date_bounds_catchup(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path,
        {
            "dags/common/__init__.py": _COMMON,
            "dags/merged.py": _catchup_dag("merged", "default_args | {'owner': 'x'}"),
            "dags/copied.py": _catchup_dag("copied", "copied"),
            "dags/spread.py": _catchup_dag("spread", "{**default_args}"),
        },
    )
    assert _at(report.findings, "IDEM005") == []
    assert [f.dag_id for f in report.information if f.rule == "IDEM005"] == ["copied", "merged", "spread"]
    # the moving start itself stays a finding, once, where it is written
    assert _at(report.findings, "IDEM003") == [("__init__.py", 5, None, None)]


def test_a_fixed_start_in_the_merge_keeps_the_catchup_finding(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path,
        {
            "dags/common/__init__.py": _COMMON,
            "dags/fixed.py": _catchup_dag(
                "fixed", "default_args | {'start_date': __import__('datetime').datetime(2020, 1, 1)}"
            ),
        },
    )
    assert [f.dag_id for f in report.findings if f.rule == "IDEM005"] == ["fixed"]


def test_the_clock_as_host_of_a_time_of_day_is_no_window(tmp_path: Path) -> None:
    code = (
        "from datetime import date, datetime, time, timedelta\n"  # 1
        "from airflow.sdk import DAG, task\n"
        "@task\n"  # 3
        "def shift(t: time):\n"
        "    later = (datetime.combine(date.today(), t) + timedelta(minutes=1)).time()\n"  # 5
        "    return later.isoformat()\n"
        "@task\n"  # 7
        "def window():\n"
        "    return (datetime.combine(date.today(), time()) - timedelta(days=7)).isoformat()\n"  # 9
        "with DAG('d', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    shift(time(9))\n"  # 11
        "    since = window()\n"  # its output kept: an XCom a task may take (round 36d)
    )
    report = lint_files(tmp_path, {"d.py": code})
    # only the window the shifted date keeps is one: seven days before today
    assert _at(report.findings, "IDEM004") == [("d.py", 9, "d", "window")]


def test_text_grown_from_its_own_value_is_an_accumulating_update(tmp_path: Path) -> None:
    code = (
        "from datetime import datetime\n"  # 1
        "from airflow import DAG\n"
        "from airflow.providers.postgres.operators.postgres import PostgresOperator\n"  # 3
        "with DAG('d', schedule=None, start_date=datetime(2024, 1, 1)):\n"
        "    PostgresOperator(task_id='link', sql=\"UPDATE bombs SET pdf = 'https://files/' || pdf\")\n"  # 5
        "    PostgresOperator(task_id='concat', sql=\"UPDATE bombs SET title = CONCAT(title, '!')\")\n"
        "    PostgresOperator(task_id='set', sql=\"UPDATE bombs SET pdf = 'https://files/' || name\")\n"  # 7
        "    PostgresOperator(task_id='guarded', sql=\"UPDATE bombs SET pdf = 'https://files/' || pdf \"\n"
        "                     \"WHERE pdf NOT LIKE 'https://%'\")\n"  # 9
        "    PostgresOperator(task_id='note', sql=\"UPDATE bombs SET comments = comments || ' | dup'\")\n"
    )
    report = lint_files(tmp_path, {"d.py": code})
    assert _at(report.findings, "IDEM008") == [("d.py", 5, "d", "link"), ("d.py", 6, "d", "concat")]
    # a note appended to an annotation column is a log of the step: information
    assert _at(report.information, "IDEM008") == [("d.py", 10, "d", "note")]


_KNACK = "\n".join(
    [
        "from airflow.decorators import task",
        "",
        "@task(task_id='get_date_filter_arg')",
        "def get_date_filter_arg(**context):",  # line 4
        "    prev = context.get('prev_start_date_success')",  # line 5
        "    return f'-d {prev.isoformat()}'",
        "",
    ]
)


def test_a_task_called_as_a_module_attribute_is_a_task(tmp_path: Path) -> None:
    dag = (
        "from datetime import datetime\n"  # 1
        "from airflow.models import DAG\n"
        "from utils import knack\n"  # 3
        "with DAG(dag_id='sync', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    knack.get_date_filter_arg()\n"  # 5
    )
    report = lint_files(tmp_path, {"utils/__init__.py": "", "utils/knack.py": _KNACK, "sync.py": dag})
    assert _at(report.findings, "IDEM004") == [("knack.py", 5, "sync", "get_date_filter_arg")]
    tasks = [t for t in report.tasks if t.task_id == "get_date_filter_arg"]
    # its file is the module the function is written in, so its line is the def's there, not line 5
    # of sync.py
    assert [(Path(t.file).name, t.line) for t in tasks] == [("knack.py", 4)]

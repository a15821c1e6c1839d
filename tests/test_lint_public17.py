"""The linter's round-17 changes (issue 35, docs/lint-evaluation.md), from round 16's misses, tested
with a few hand-written lines; what each test asserts is what a reviewer would say of the snippet,
worked out by hand:

- an imported ``@task`` function called in a DAG body adds its task to that DAG, as Airflow does
  (Austin's ``get_date_filter_arg``, called by three Knack syncs), and its code is checked;
- a window taken from the last successful run (``prev_start_date_success``,
  ``prev_data_interval_*_success``, ``prev_execution_date_success``), in Python or a template, is
  state, not the run's interval: IDEM004 at the read; the run's own names stay clean;
- ``@dag("daily_load")`` names its DAG by the first positional argument, not the function.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import RuleFinding
from tests.lintfiles import lint_files, per_task


def _at(entries: list[RuleFinding], rule: str) -> list[tuple[str, int, str | None, str | None]]:
    return sorted(
        (Path(f.file).name, f.line, f.dag_id, f.task_id) for f in per_task(entries) if f.rule == rule
    )


_KNACK = (
    "from airflow.decorators import task\n"  # 1
    "from pendulum import now\n"
    "@task(task_id='get_date_filter_arg')\n"  # 3
    "def get_date_filter_arg(should_replace_monthly=False, **context):\n"
    "    today = now()\n"  # 5
    "    prev = context.get('prev_start_date_success') or today\n"
    "    if should_replace_monthly and today.day == 1:\n"  # 7
    "        return ''\n"
    "    return f'-d {prev.isoformat()}'\n"  # 9
)


def _sync(dag_id: str) -> str:
    return (
        "from datetime import datetime\n"  # 1
        "from airflow.models import DAG\n"
        "from airflow.operators.bash import BashOperator\n"  # 3
        "from utils.knack import get_date_filter_arg\n"
        f"with DAG(dag_id='{dag_id}', schedule='@daily', start_date=datetime(2024, 1, 1),\n"  # 5
        "         catchup=False):\n"
        "    arg = get_date_filter_arg(should_replace_monthly=True)\n"  # 7
        "    sync = BashOperator(task_id='sync', bash_command=f'sync.py {arg}')\n"
        "    arg >> sync\n"  # 9
    )


def test_imported_task_called_in_a_dag_body_is_a_task_of_each_dag(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/knack.py": _KNACK,
            "sync_a.py": _sync("sync_a"),
            "sync_b.py": _sync("sync_b"),
        },
    )
    # one window per DAG, at the read of the last success (the `now()` fallback is that window)
    assert _at(report.findings, "IDEM004") == [
        ("knack.py", 6, "sync_a", "get_date_filter_arg"),
        ("knack.py", 6, "sync_b", "get_date_filter_arg"),
    ]
    assert _at(report.findings, "IDEM003") == []


def _dag(code: str) -> str:
    return (
        "from datetime import datetime\n"  # 1
        "from airflow.sdk import DAG, task\n"
        "from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator\n"  # 3
        + code
        + "with DAG('d', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    load()\n"
    )


def test_last_success_in_python_and_templates_is_a_window_from_state(tmp_path: Path) -> None:
    code = (
        "@task\n"  # 4
        "def load(prev_execution_date_success=None, **context):\n"
        "    start = context['prev_data_interval_end_success']\n"  # 6
        "    return fetch(since=start)\n"
    )
    sql = (
        "from datetime import datetime\n"  # 1
        "from airflow.sdk import DAG\n"
        "from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator\n"  # 3
        "with DAG('s', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    SQLExecuteQueryOperator(task_id='copy', conn_id='wh', sql='''\n"  # 5
        "        DELETE FROM daily WHERE day = '{{ ds }}';\n"
        "        INSERT INTO daily SELECT * FROM events\n"  # 7
        "        WHERE ts >= '{{ prev_data_interval_start_success }}';''')\n"
    )
    report = lint_files(tmp_path, {"dag.py": _dag(code), "sql.py": sql})
    # the function's parameter (line 5) and its subscript (line 6) are one window: the first read
    assert _at(report.findings, "IDEM004") == [
        ("dag.py", 5, "d", "load"),
        ("sql.py", 8, "s", "copy"),
    ]


def test_the_runs_own_interval_stays_clean(tmp_path: Path) -> None:
    code = (
        "@task\n"  # 4
        "def load(**context):\n"
        "    start = context['data_interval_start']\n"  # 6
        "    prev = context.get('prev_data_interval_start')\n"
        "    return fetch(since=start, prev=prev)\n"  # 8
    )
    report = lint_files(tmp_path, {"dag.py": _dag(code)})
    assert _at(report.findings, "IDEM004") == []


def test_dag_id_given_positionally_to_the_dag_decorator(tmp_path: Path) -> None:
    dag = (
        "from datetime import datetime\n"  # 1
        "from airflow.sdk import dag\n"
        "@dag('lob_daily_load', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=True)\n"  # 3
        "def exe_process():\n"
        "    pass\n"  # 5
        "exe_process()\n"
    )
    report = lint_files(tmp_path, {"dag.py": dag})
    assert _at(report.findings, "IDEM005") == [("dag.py", 3, "lob_daily_load", None)]

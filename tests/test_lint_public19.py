"""Round 19 (issue 35, docs/lint-evaluation.md): the lead's settlement of catchup severity, tested with
a few hand-written DAGs; what each test asserts is what a reviewer would say of the snippet:

- an explicit ``catchup=True`` over tasks that take the run's window is a chosen backlog in which
  each run writes its own window: IDEM005 as information, saying how many runs it creates and that
  ``max_active_runs=`` / ``end_date=`` are not set;
- the same DAG with no ``catchup=`` on Airflow 2 (the default, on) gets the backlog by accident; each
  caught-up run still writes its own window, so round 36b made it information too (every useful
  implicit-catchup label of rounds 1-36 is over tasks taking no window); over tasks taking no window
  it stays a finding, even with ``max_active_runs=1`` (which exempts only an explicit ``catchup=True``);
- an explicit ``catchup=True`` over a task that takes its day from the clock, or over tasks that take
  no window at all, stays a finding: every caught-up run writes the same current data.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from airflow_idempotent.lint import lint_paths

_DAG = """\
from datetime import datetime
from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
with DAG("d", {schedule}start_date=datetime(2022, 1, 1){extra}):
    SQLExecuteQueryOperator(task_id="t", conn_id="w", sql="{sql}")
"""
_RUN = "DELETE FROM x WHERE day = '{{ ds }}'; INSERT INTO x SELECT * FROM s WHERE day = '{{ ds }}'"
_CLOCK = (
    "DELETE FROM x WHERE day = CURRENT_DATE - 1; INSERT INTO x SELECT * FROM s WHERE day = CURRENT_DATE - 1"
)
_NONE = "TRUNCATE x; INSERT INTO x SELECT * FROM s"


def _lint(
    tmp_path: Path, sql: str, schedule: str = "schedule='@daily', ", extra: str = ", catchup=True"
) -> tuple[list[int], list[str]]:
    path = tmp_path / "d.py"
    path.write_text(_DAG.format(schedule=schedule, extra=extra, sql=sql))
    report = lint_paths([path])
    failing = [f.line for f in report.findings if f.rule == "IDEM005"]
    info = [i.message for i in report.information if i.rule == "IDEM005"]
    return failing, info


def test_chosen_catchup_over_the_run_window_is_information_with_its_backlog(tmp_path: Path) -> None:
    failing, info = _lint(tmp_path, _RUN)
    assert failing == []
    (message,) = info
    days = (date.today() - date(2022, 1, 1)).days  # the runs @daily creates since the start
    assert f"({days:,} so far" in message or f"({days - 1:,} so far" in message, message
    assert "max_active_runs= is not set" in message and "end_date" in message


def test_a_run_limit_is_not_asked_for_again(tmp_path: Path) -> None:
    failing, info = _lint(tmp_path, _RUN, extra=", catchup=True, max_active_runs=3")
    assert failing == [] and len(info) == 1 and "max_active_runs= is not set" not in info[0]


def test_implicit_catchup_on_airflow_2_over_the_run_window_is_information(tmp_path: Path) -> None:
    failing, info = _lint(tmp_path, _RUN, schedule="schedule_interval='@daily', ", extra="")
    assert failing == [] and len(info) == 1 and info[0].startswith("no catchup=")


def test_implicit_catchup_on_airflow_2_over_no_window_stays_a_finding(tmp_path: Path) -> None:
    failing, info = _lint(tmp_path, _NONE, schedule="schedule_interval='@daily', ", extra="")
    assert failing == [4] and info == []


def test_one_run_at_a_time_does_not_excuse_implicit_catchup(tmp_path: Path) -> None:
    """Mozilla's ``experiments_live``: no ``catchup=`` on Airflow 2, every 5 minutes since 2021, with
    ``max_active_runs=1``. The backlog nobody asked for is throttled, not bounded: a finding saying so;
    the same run limit on an explicit ``catchup=True`` is a chosen, throttled backfill: nothing."""
    schedule = "schedule_interval='*/5 * * * *', "
    failing, info = _lint(tmp_path, _NONE, schedule=schedule, extra=", max_active_runs=1")
    assert failing == [4] and info == []
    message = next(f.message for f in lint_paths([tmp_path / "d.py"]).findings)
    assert "max_active_runs=1 throttles it" in message and "does not bound it" in message, message
    assert "catchup=False" in message and "end_date=" in message, message
    failing, info = _lint(tmp_path, _NONE, schedule=schedule, extra=", catchup=True, max_active_runs=1")
    assert failing == [] and info == []


def test_chosen_catchup_over_a_clock_window_stays_a_finding(tmp_path: Path) -> None:
    failing, info = _lint(tmp_path, _CLOCK)
    assert failing == [4] and info == []


def test_chosen_catchup_over_tasks_with_no_window_stays_a_finding(tmp_path: Path) -> None:
    failing, info = _lint(tmp_path, _NONE)
    assert failing == [4] and info == []


_PARAM_DAG = """\
import datetime
from airflow.decorators import dag, task
from airflow.models.param import Param
@dag(schedule=None, start_date=datetime.datetime(2021, 1, 1), catchup=False,
     params={"start_date": Param(f"{datetime.date.today()}", type="string")})
def backfill_dag():
    @task
    def run(**context):
        return context["params"]["start_date"]
    run()
{call}
"""


def test_a_param_default_in_a_dag_decorator_is_not_read_by_calling_the_dag(tmp_path: Path) -> None:
    """Calling a ``@dag`` function runs its body, not its decorator: the ``Param`` default (a UI
    default of a hand-triggered DAG, module-level code) is no clock read of the call (mozilla's
    ``bqetl_backfill`` and ``operational_monitoring_backfill``); a helper whose body returns the clock
    still is."""
    path = tmp_path / "d.py"
    path.write_text(_PARAM_DAG.replace("{call}", "dag = backfill_dag()"))
    assert [f.rule for f in lint_paths([path]).findings] == []
    helper = "def stamp():\n    return datetime.date.today().isoformat()\nSTAMP = stamp()\nopen(STAMP, 'w')"
    path.write_text(_PARAM_DAG.replace("{call}", helper))
    assert ("IDEM003", 13) in [(f.rule, f.line) for f in lint_paths([path]).findings]


def test_a_clock_default_of_a_called_helper_is_still_read(tmp_path: Path) -> None:
    """A default argument is evaluated when the module defines the helper and its value flows into
    the call (superdao's ``generate_gcs_object_name(.., execution_dt=datetime.now())``): still read."""
    helper = (
        "def name(day=datetime.datetime.now()):\n    return day.isoformat()\nNAME = name()\nopen(NAME, 'w')"
    )
    path = tmp_path / "d.py"
    path.write_text(_PARAM_DAG.replace("{call}", helper))
    assert ("IDEM003", 13) in [(f.rule, f.line) for f in lint_paths([path]).findings]


def test_fetching_the_context_for_a_message_is_not_taking_the_window(tmp_path: Path) -> None:
    """A task that calls ``get_current_context()`` only for the DAG's id (navikt's Slack report)
    takes no window: explicit catchup over it and a windowless diff stays a finding."""
    code = (
        "from datetime import datetime\n"
        "from airflow import DAG\n"
        "from airflow.decorators import task\n"
        "from airflow.operators.python import get_current_context\n"
        "with DAG('d', start_date=datetime(2024, 3, 21), schedule_interval='0 11 5 * *', catchup=True):\n"
        "    @task\n"
        "    def report():\n"
        "        print(get_current_context()['dag'].dag_id)\n"
        "    report()\n"
    )
    path = tmp_path / "d.py"
    path.write_text(code)
    assert [(f.rule, f.line) for f in lint_paths([path]).findings] == [("IDEM005", 5)]


def test_a_factory_handed_the_dag_builds_its_tasks(tmp_path: Path) -> None:
    """stellar's ``build_bq_generate_avro_job(dag=dag, ..)`` makes its operator with no ``dag=`` and
    returns it; Airflow 2 attaches it to the DAG through ``>>``. The task belongs to the DAG (its
    window and the DAG's catchup are judged together), not to no DAG."""
    code = (
        "from datetime import datetime\n"
        "from airflow import DAG\n"
        "from airflow.operators.empty import EmptyOperator\n"
        "from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator\n"
        "def build(dag, table):\n"
        "    return SQLExecuteQueryOperator(task_id=f'load_{table}', conn_id='w', sql='SELECT 1')\n"
        "dag = DAG('d', schedule=None, start_date=datetime(2024, 1, 1))\n"
        "start = EmptyOperator(task_id='start', dag=dag)\n"
        "start >> build(dag, 'orders')\n"
    )
    path = tmp_path / "d.py"
    path.write_text(code)
    report = lint_paths([path])
    assert sorted((t.dag_id, t.task_id) for t in report.tasks) == [("d", "load_orders"), ("d", "start")]

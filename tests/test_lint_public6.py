"""The linter's round-6 changes (issue 35, docs/lint-evaluation.md): each a principle stated once in
the module that owns the rule, tested here with a few hand-written lines. What each test asserts is
what a reviewer would say of the snippet, counted by hand (never read from the linter's tables):

- a Jinja template with a ``.py`` suffix is no DAG file to fix: information, not IDEM000 (linter);
- a clock shifted by a span that is only rendered into a template is no window (pyfacts);
- each repository function a clock is read through is its own cause, so two DAG factories called in
  one file are two findings; a factory whose clock reaches only its DAGs' start_date through local
  names still builds windowless DAGs when their schedule is None or @once (findings, schedule);
- a function of the repository's own module called as ``module.function(..)`` is followed, with its
  arguments bound, as when it is called by name (codechecks).
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import lint_files


def _rules(items: list) -> list[tuple[str, str, int]]:  # type: ignore[type-arg]
    return sorted((f.rule, Path(f.file).name, f.line) for f in items)


# -- (a) Jinja templates with a .py suffix -------------------------------------------------------

_TEMPLATE = '''"""{{ name }}"""
from airflow import DAG

target = '{{ name }}'
depends_on = {{ dependencies }}

{% raw %}
log_url = f'{base}/dags/{dag_id}/runs/{{{{ dag_run.run_id }}}}'
{% endraw %}
'''


def test_a_jinja_template_of_a_dag_file_is_information_not_a_defect(tmp_path: Path) -> None:
    """semio's templates/: line 7 is ``{% raw %}``, Jinja where Python stops. Nothing to fix in the
    file (it renders DAG files): one information entry, no finding, exit code unaffected."""
    report = lint_files(tmp_path, {"templates/etl_recipe.py": _TEMPLATE})
    assert report.findings == []
    assert _rules(report.information) == [("IDEM000", "etl_recipe.py", 7)]
    assert "Jinja" in report.information[0].message


def test_a_syntax_error_beside_templated_sql_stays_idem000(tmp_path: Path) -> None:
    """A ``def`` without its colon (line 4) in a file whose SQL holds ``{{ ds }}``: the markup is not
    where the parser stops, so the file is a broken DAG file, a finding."""
    text = (
        "from airflow import DAG\n"
        "SQL = \"DELETE FROM t WHERE day = '{{ ds }}'\"\n"
        "\n"
        "def build()\n"
        "    return SQL\n"
    )
    report = lint_files(tmp_path, {"broken.py": text})
    assert _rules(report.findings) == [("IDEM000", "broken.py", 4)]
    assert report.information == []


# -- (c) a shifted clock only rendered into a generated file -------------------------------------

_GENERATOR = """from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.python import PythonOperator
from jinja2 import Environment


def refresh(env: Environment) -> None:
    now = datetime.utcnow() - timedelta(days=1)
    dt_str = "datetime({}, {}, {})".format(now.year, now.month, now.day)
    template = env.get_template("etl_recipe.py")
    with open("dags/generated.py", "w") as f:
        f.write(template.render(name="x", datetime=dt_str))


with DAG("refresh", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="refresh", python_callable=refresh)
"""


def test_a_shifted_clock_only_rendered_into_a_template_is_no_window(tmp_path: Path) -> None:
    """``utcnow() - 1 day`` becomes the text of a generated DAG's start_date (semio): nothing is read
    over that span, so no IDEM004; it is listed as information at the read (line 9)."""
    report = lint_files(tmp_path, {"refresh.py": _GENERATOR})
    assert report.findings == []
    assert _rules(report.information) == [("IDEM004", "refresh.py", 9)]


def test_a_shifted_clock_that_filters_rows_stays_a_window(tmp_path: Path) -> None:
    """The same shifted value, also sent in a query's filter: a rerun a day late reads another day.
    One use outside a template is enough: IDEM004 at the read (line 9)."""
    text = _GENERATOR.replace(
        '        f.write(template.render(name="x", datetime=dt_str))\n',
        '        f.write(template.render(name="x", datetime=dt_str))\n'
        "    hook.run(f\"DELETE FROM t WHERE day < '{now}'\")\n",
    ).replace("def refresh(env: Environment)", "def refresh(env: Environment, hook)")
    report = lint_files(tmp_path, {"refresh.py": text})
    assert ("IDEM004", "refresh.py", 9) in _rules(report.findings)


# -- (d) DAG factories called in one file --------------------------------------------------------


def _factory(name: str, schedule: str) -> str:
    return f"""from datetime import datetime, time, timedelta

from airflow import DAG
from airflow.operators.empty import EmptyOperator


def {name}(dataset):
    start = datetime.utcnow()
    start = datetime.combine(start.date(), time(start.hour, 0))
    default_args = {{'owner': 'airflow', 'start_date': start, 'retries': 1}}
    dag = DAG(dag_id=dataset + '_{name}', default_args=default_args, schedule_interval={schedule!r})
    EmptyOperator(task_id='scan', dag=dag)
    return dag
"""


_INIT = """from airflow import configuration
from scanners.continuous import continuous_scan_dag
from scanners.daily import daily_scan_dag
from scanners.once import once_scan_dag


def register_dag(dag):
    globals()[dag.dag_id] = dag
    return dag.dag_id


def register(dataset):
    register_dag(continuous_scan_dag(dataset))
    register_dag(daily_scan_dag(dataset))
    register_dag(once_scan_dag(dataset))


register(configuration.get('data-factory', 'DATASET'))
"""


def test_each_dag_factory_call_is_its_own_finding(tmp_path: Path) -> None:
    """LREN-CHUV's shape: a continuous scanner (every 10 h) and a daily one (@daily), each with a
    start at the current hour, registered on lines 13 and 14: two moving starts of scheduled DAGs,
    two IDEM003 findings (one no longer hides the other). The @once scanner (line 15) reads the
    clock only for its start, through the name ``start``: its DAG creates no windows, information."""
    report = lint_files(
        tmp_path,
        {
            "scanners/__init__.py": "",
            "scanners/continuous.py": _factory("continuous_scan_dag", "0 */10 * * *"),
            "scanners/daily.py": _factory("daily_scan_dag", "@daily"),
            "scanners/once.py": _factory("once_scan_dag", "@once"),
            "init.py": _INIT,
        },
    )
    at_init = [r for r in _rules(report.findings) if r[1] == "init.py"]
    assert at_init == [("IDEM003", "init.py", 13), ("IDEM003", "init.py", 14)]
    assert [r for r in _rules(report.information) if r[1] == "init.py"] == [("IDEM003", "init.py", 15)]


# -- (e) module.function(..) of the repository's own module --------------------------------------

_HELPERS = """from sqlalchemy import create_engine, text

engine = create_engine("postgresql://wh")


def apply_change(query, action):
    with engine.connect() as conn:
        conn.execute(text(query))
"""


def _loader(call: str) -> str:
    return f"""from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator

{call.split("|")[0]}


def load(rows):
    {call.split("|")[1]}("DELETE FROM panda.threshold", "DELETE")
    for row in rows:
        {call.split("|")[1]}("INSERT INTO panda.threshold (id) VALUES (1)", "INSERT")


with DAG("thresholds", schedule="*/30 * * * *", start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="load", python_callable=load, op_args=[[]])
"""


def test_sql_sent_through_a_module_function_is_the_tasks(tmp_path: Path) -> None:
    """``import functions as functions_2``; ``functions_2.apply_change(sql, ..)`` (mitgate's shape):
    the helper runs the SQL it is given, so the task deletes the table and inserts again, a full
    replace that a rerun repeats safely: no IDEM002, as when the helper is called by its name."""
    by_module = lint_files(
        tmp_path / "m",
        {
            "functions.py": _HELPERS,
            "dag.py": _loader("import functions as functions_2|functions_2.apply_change"),
        },
    )
    by_name = lint_files(
        tmp_path / "n",
        {"functions.py": _HELPERS, "dag.py": _loader("from functions import apply_change|apply_change")},
    )
    assert [f.rule for f in by_name.findings if f.rule == "IDEM002"] == []
    assert [f.rule for f in by_module.findings if f.rule == "IDEM002"] == []


def test_an_append_through_a_module_function_is_found(tmp_path: Path) -> None:
    """The same helper sent only the INSERT: every rerun adds the rows again. Before round 6 the call
    through the module was not followed and nothing was found; now IDEM002 for the task."""
    dag = _loader("import functions as functions_2|functions_2.apply_change").replace(
        '    functions_2.apply_change("DELETE FROM panda.threshold", "DELETE")\n', ""
    )
    report = lint_files(tmp_path, {"functions.py": _HELPERS, "dag.py": dag})
    assert [(f.rule, f.task_id) for f in report.findings if f.rule == "IDEM002"] == [("IDEM002", "load")]


# -- (b) a clock value that only stamps a record, or keys one ------------------------------------


def _observer(body: str) -> str:
    return f"""from datetime import UTC, datetime
from hashlib import sha256

from airflow.decorators import dag, task


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
def observe():
    @task
    def observe_run(run_id: str, task_state_store=None, client=None):
{body}

    observe_run("r")


observe()
"""


def _clock_rules(report: LintReport) -> tuple[list[str], list[str]]:
    """(IDEM003 findings, IDEM003 information) of the task, as rule names."""
    found = [f.rule for f in report.findings if f.rule == "IDEM003"]
    informed = [f.rule for f in report.information if f.rule == "IDEM003"]
    return found, informed


def test_a_clock_value_only_stamping_a_returned_record_is_information(tmp_path: Path) -> None:
    """adapstory's observation: ``"observedAt": now()`` in the record the task returns. A rerun
    returns the record with a later stamp; nothing is keyed on it: information, no finding."""
    body = (
        "        return {\n"
        '            "runId": run_id,\n'
        '            "observedAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"),\n'
        '            "state": "success",\n'
        "        }"
    )
    assert _clock_rules(lint_files(tmp_path, {"observe.py": _observer(body)})) == ([], ["IDEM003"])


def test_a_clock_value_that_also_keys_the_record_stays_a_finding(tmp_path: Path) -> None:
    """The same stamp, also hashed into the record's id (adapstory's generated_at -> operation id):
    a retry writes the record under a new id. Decided by where the value goes: a finding."""
    body = (
        "        observed = datetime.now(UTC).isoformat()\n"
        "        op_id = sha256(observed.encode()).hexdigest()\n"
        '        return {"operationId": op_id, "observedAt": observed}'
    )
    assert _clock_rules(lint_files(tmp_path, {"observe.py": _observer(body)}))[0] == ["IDEM003"]


def test_a_stamped_record_kept_as_task_state_stays_a_finding(tmp_path: Path) -> None:
    """Airflow's state-store example (the corpus labels it real): the stamped record is saved as the
    task's state, which its next run or retry reads back. A finding."""
    body = (
        '        result = {"table": run_id, "processed_at": datetime.now(UTC).isoformat()}\n'
        '        task_state_store.set("result", result)\n'
        "        return result"
    )
    assert _clock_rules(lint_files(tmp_path, {"observe.py": _observer(body)}))[0] == ["IDEM003"]


def test_a_clock_value_passed_as_a_functions_keyword_stays_a_finding(tmp_path: Path) -> None:
    """``client.fetch(since=now())``: a keyword of a function may filter what is read (only ``dict``
    and classes build records from keywords). A finding."""
    body = "        return client.fetch(run_id=run_id, since=datetime.now(UTC))"
    assert _clock_rules(lint_files(tmp_path, {"observe.py": _observer(body)}))[0] == ["IDEM003"]

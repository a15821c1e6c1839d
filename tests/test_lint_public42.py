"""Round 32b (issue 35, lint42, docs/lint-evaluation.md): cern-sis/bi-dags writes its tables through a
decorator of its own, ``@sqlalchemy_task(conn_id=..)``, whose inner ``@task`` function opens a session
and calls the decorated function with it. The decorated function is the task's code, and the task is
named after the inner function (``populate_database``, numbered ``__1`` .. when a DAG calls several),
as Airflow names it. ``session.add_all(rows)`` of a list filled by ``rows.append(Model(..))`` appends
those rows, and ``session.merge(Model(..))`` with no primary key given inserts.

6 of the 7 tests fail on main 25ba36b (checked against main's package): main sees no task in a
wrapped function and reads neither the appended list nor the keyless merge; among them the guard
that rows carrying a model's unique key fail on it instead of appending (main sees no task there
either). The other guard passes on main too: a decorator that never calls the function it wraps
makes no task.
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import finding_rows, lint_files

_DECORATOR = """\
from airflow.decorators import task
from sqlalchemy.orm import sessionmaker


def get_session(conn_id):
    return sessionmaker()()


def sqlalchemy_task(conn_id):
    def decorator(func):
        {wraps}@task(retries=0)
        def populate_database(*args, **kwargs):
            session = get_session(conn_id)
            result = func(*args, session=session, **kwargs)
            session.commit()
            return result

        return populate_database

    return decorator
"""

_MODELS = """\
from sqlalchemy import Column, Date, DateTime, Integer, String
from sqlalchemy.ext.declarative import declarative_base

Base = declarative_base()


class Metric(Base):
    __tablename__ = "catalog_metrics"

    id = Column(Integer, autoincrement=True, primary_key=True)
    date = Column(Date, nullable=False{unique})
    key = Column(String, nullable=False)
    value = Column(Integer, nullable=False)
"""

_DAG = """\
import datetime

from airflow.macros import ds_add
from airflow.sdk import dag
from common.sqlalchemy_operator import sqlalchemy_task
from models import Metric


@dag(start_date=datetime.datetime(2025, 1, 1), schedule="0 2 * * *", catchup={catchup})
def catalog_metrics():
    @sqlalchemy_task(conn_id="warehouse")
    def populate(category, session, **context):
        day = ds_add(context["ds"], -1)
        records = []
        for key, value in fetch(category, day).items():
            records.append(Metric(date=day, key=key, value=value))
        session.add_all(records)

    populate("loans")
    populate("items")


def fetch(category, day):
    return {{}}


catalog_metrics()
"""

#: the line of ``session.add_all(records)`` in _DAG, counted by hand
_ADD_LINE = 17


def _files(wraps: str = "", catchup: str = "False", unique: str = "", dag: str = _DAG) -> dict[str, str]:
    return {
        "common/__init__.py": "",
        "common/sqlalchemy_operator.py": _DECORATOR.format(wraps=wraps),
        "models.py": _MODELS.format(unique=unique),
        "catalog_metrics.py": dag.format(catchup=catchup),
    }


def test_a_wrapped_function_appending_rows_is_idem002_named_after_the_inner_task(tmp_path: Path) -> None:
    rows = [r for r in finding_rows(lint_files(tmp_path, _files())) if r[0] == "IDEM002"]
    # two calls of one decorated function: two tasks, the second numbered as Airflow numbers it
    assert rows == [
        ("IDEM002", "catalog_metrics.py", _ADD_LINE, "populate_database"),
        ("IDEM002", "catalog_metrics.py", _ADD_LINE, "populate_database__1"),
    ]


def test_functools_wraps_names_the_task_after_the_decorated_function(tmp_path: Path) -> None:
    files = _files(wraps="@functools.wraps(func)\n        ")
    files["common/sqlalchemy_operator.py"] = "import functools\n" + files["common/sqlalchemy_operator.py"]
    rows = [r for r in finding_rows(lint_files(tmp_path, files)) if r[0] == "IDEM002"]
    assert rows == [
        ("IDEM002", "catalog_metrics.py", _ADD_LINE, "populate"),
        ("IDEM002", "catalog_metrics.py", _ADD_LINE, "populate__1"),
    ]


def test_catchup_over_a_wrapped_task_taking_ds_is_no_idem005(tmp_path: Path) -> None:
    report = lint_files(tmp_path, _files(catchup="True"))
    assert [f.rule for f in report.findings if f.rule == "IDEM005"] == []
    assert [f.rule for f in report.information if f.rule == "IDEM005"] == ["IDEM005"]


def test_a_merge_without_the_primary_key_into_a_unique_date_fails_on_the_key(tmp_path: Path) -> None:
    dag = _DAG.replace("records.append(Metric(date=day, key=key, value=value))", "pass").replace(
        "session.add_all(records)", "session.merge(Metric(date=day, key=category, value=1))"
    )
    report = lint_files(tmp_path, _files(unique=", unique=True", dag=dag))
    answers = [t.runs_twice for t in report.tasks if t.task_id == "populate_database"]
    assert len(answers) == 1 and answers[0].startswith("Fails:")
    assert [r for r in finding_rows(report) if r[0] == "IDEM002"] == []


def test_a_decorator_that_never_calls_the_function_makes_no_task(tmp_path: Path) -> None:
    files = _files()
    files["common/sqlalchemy_operator.py"] = files["common/sqlalchemy_operator.py"].replace(
        "result = func(*args, session=session, **kwargs)", "result = None"
    )
    report = lint_files(tmp_path, files)
    assert [t.task_id for t in report.tasks] == []
    assert [r for r in finding_rows(report) if r[0] == "IDEM002"] == []


def test_appended_rows_carrying_a_unique_key_fail_on_it_not_append(tmp_path: Path) -> None:
    report = lint_files(tmp_path, _files(unique=", unique=True"))
    assert [r for r in finding_rows(report) if r[0] == "IDEM002"] == []
    answers = {t.task_id: t.runs_twice for t in report.tasks}
    assert sorted(answers) == ["populate_database", "populate_database__1"]
    assert all(a.startswith("Fails:") for a in answers.values())


def test_add_all_of_an_appended_list_in_a_plain_task_appends(tmp_path: Path) -> None:
    dag = _DAG.replace(
        "from common.sqlalchemy_operator import sqlalchemy_task\n", "from airflow.sdk import task\n"
    )
    dag = dag.replace('@sqlalchemy_task(conn_id="warehouse")', "@task").replace(
        "def populate(category, session, **context):", "def populate(category, session=None, **context):"
    )
    rows = [r for r in finding_rows(lint_files(tmp_path, _files(dag=dag))) if r[0] == "IDEM002"]
    assert rows == [
        ("IDEM002", "catalog_metrics.py", _ADD_LINE, "populate"),
        ("IDEM002", "catalog_metrics.py", _ADD_LINE, "populate__1"),
    ]

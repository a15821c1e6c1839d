"""Round 21 (issue 35, lint23, docs/lint-evaluation.md): the costliest causes of the fresh held-out
batch's false and harmless findings, tested with small projects of hand-written files. What each test
asserts is what a reviewer reading the files would say; each fails on main 0db1381.

- scieloorg's opac-airflow reads Variables that are queues, sets and flags (``Variable.get("orphan_
  documents", default_var=[], ..)``, ``Variable.get("IS_SPORADIC", "False")``) and saves them again:
  the linter called each a watermark (IDEM004, 8 false). A read whose default is a list, tuple, set or
  boolean is no point a window starts at.
- sul-dlss' libsys-airflow asks the Airflow API for a token (``httpx.post(f"{host}/auth/token")``)
  before triggering runs: the linter called the login an unkeyed POST (IDEM006). A POST that issues
  credentials changes no data.
- libsys-airflow deletes the vendor file row it found (``session.delete(existing)``) and adds it
  again: the linter called the add an append (IDEM002, false). An ORM delete of a looked-up model
  is a delete of its table, so the add replaces.
- eft-library's row builders stamp ``update_time = pendulum.now()`` into the tuple they return for an
  upsert: 27 harmless IDEM003. ``update_time`` is an audit column's name, and a stamp-named local
  returned as an item of a row is that row's stamp field: information.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import lint_paths


def _lint(tmp_path: Path, files: dict[str, str]) -> tuple[list[tuple[str, str, int, str | None]], list[str]]:
    """(rule, file name, line, task) of every finding, sorted; and the information's rules."""
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    report = lint_paths([tmp_path])
    found = sorted((f.rule, Path(f.file).name, f.line, f.task_id) for f in report.findings)
    return found, sorted(f"{i.rule}:{i.task_id}" for i in report.information)


_STATE_DAG = """\
from datetime import datetime

from airflow.models import Variable
from airflow.operators.python import PythonOperator
from airflow import DAG

with DAG("sync", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False) as dag:

    def register_documents():
        orphans = Variable.get("orphan_documents", default_var=[], deserialize_json=True)
        retried = [o for o in orphans if o]
        Variable.set("orphan_documents", retried, serialize_json=True)
        return retried

    def must_send_email():
        is_sporadic = Variable.get("IS_SPORADIC", "False")
        Variable.set("IS_SPORADIC", "False")
        return False if is_sporadic == "True" else True

    def load_since_mark():
        since = Variable.get("orders_since", default_var="2024-01-01")
        rows = fetch(f"SELECT * FROM src WHERE ts > '{since}'")
        Variable.set("orders_since", max(r[0] for r in rows))

    def fetch(sql):
        return []

    PythonOperator(task_id="register_documents", python_callable=register_documents)
    PythonOperator(task_id="must_send_email", python_callable=must_send_email)
    PythonOperator(task_id="load_since_mark", python_callable=load_since_mark)
"""


def test_a_variable_kept_as_a_list_or_a_flag_is_no_watermark(tmp_path: Path) -> None:
    found, _ = _lint(tmp_path, {"dags/sync.py": _STATE_DAG})
    # the queue of orphans (default []) and the flag (default "False") start no window; the string
    # mark a task saves and reads again (line 21) still does
    assert [f for f in found if f[0] == "IDEM004"] == [("IDEM004", "sync.py", 21, "load_since_mark")]


_LOGIN_DAG = """\
from datetime import datetime

import httpx
from airflow.sdk import dag, task


def token(host):
    response = httpx.post(f"{host}/auth/token", json={"username": "u", "password": "p"})
    return response.json()["access_token"]


def authorize(host, card):
    return httpx.post(f"{host}/payments/auth", json={"card": card})


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 3})
def api():
    @task
    def list_runs():
        return httpx.get("http://api/runs", headers={"Authorization": token("http://api")}).json()

    @task
    def charge():
        return authorize("http://pay", "4111").json()

    list_runs() >> charge()


api()
"""


def test_a_post_that_asks_for_a_token_sends_nothing(tmp_path: Path) -> None:
    found, _ = _lint(tmp_path, {"dags/api.py": _LOGIN_DAG})
    # the login (line 8) is no side effect; a POST to a payment's /auth (line 13) still is
    assert [f for f in found if f[0] == "IDEM006"] == [("IDEM006", "api.py", 13, "charge")]


_MODELS = """\
from sqlalchemy import Column, Integer, String
from sqlalchemy.orm import declarative_base

Base = declarative_base()


class VendorFile(Base):
    __tablename__ = "vendor_files"

    id = Column(Integer, primary_key=True)
    vendor_filename = Column(String)
    status = Column(String)

    @classmethod
    def load(cls, filename, session):
        return session.query(cls).filter(cls.vendor_filename == filename).first()
"""

#: the head of a DAG file whose tasks write VendorFile rows through a session
_ORM_HEAD = """\
from datetime import datetime

from airflow.sdk import dag, task
from sqlalchemy.orm import Session

from models import VendorFile

ENGINE = None


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
"""

_VENDOR_DAG = (
    _ORM_HEAD
    + """\
def vendor():
    @task
    def replace_file_row(filename: str):
        with Session(ENGINE) as session:
            existing = VendorFile.load(filename, session)
            if existing:
                session.delete(existing)
            session.add(VendorFile(vendor_filename=filename, status="fetched"))
            session.commit()

    @task
    def replace_all_rows(filename: str):
        with Session(ENGINE) as session:
            session.query(VendorFile).filter(VendorFile.status == "old").delete()
            session.add(VendorFile(vendor_filename=filename, status="fetched"))
            session.commit()

    @task
    def append_file_row(filename: str):
        with Session(ENGINE) as session:
            session.add(VendorFile(vendor_filename=filename, status="fetched"))
            session.commit()

    replace_file_row("a") >> replace_all_rows("b") >> append_file_row("c")


vendor()
"""
)


def test_an_orm_delete_of_the_model_makes_its_add_a_replace(tmp_path: Path) -> None:
    found, _ = _lint(tmp_path, {"models.py": _MODELS, "dags/vendor.py": _VENDOR_DAG})
    # only the add with no delete of VendorFile in its task (line 32) appends
    assert [f for f in found if f[0] == "IDEM002"] == [("IDEM002", "vendor.py", 32, "append_file_row")]


_BUILDER = """\
import pendulum


def process_bonus(level_id, item):
    update_time = pendulum.now("Asia/Seoul")
    return (level_id, item.get("type"), item.get("value"), update_time)


def process_window(item):
    start_time = pendulum.now("Asia/Seoul")
    return (item.get("id"), start_time)
"""

_UPSERT_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook

from custom_module.bonus import process_bonus, process_window

UPSERT = (
    "INSERT INTO bonus (level_id, type, value, update_time) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (level_id, type) DO UPDATE SET value = EXCLUDED.value, update_time = EXCLUDED.update_time"
)

KEYED = "INSERT INTO w (id, t) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING"

with DAG("bonus", schedule="10 0 * * *", start_date=datetime(2024, 5, 1), catchup=False) as dag:

    def upsert_bonus(items):
        conn = PostgresHook("pg").get_conn()
        cursor = conn.cursor()
        for item in items:
            cursor.execute(UPSERT, process_bonus(1, item))
        conn.commit()

    def upsert_window(items):
        conn = PostgresHook("pg").get_conn()
        cursor = conn.cursor()
        for item in items:
            cursor.execute(KEYED, process_window(item))
        conn.commit()

    PythonOperator(task_id="upsert_bonus", python_callable=upsert_bonus, op_args=[[]])
    PythonOperator(task_id="upsert_window", python_callable=upsert_window, op_args=[[]])
"""


def test_update_time_returned_in_a_row_is_a_stamp(tmp_path: Path) -> None:
    found, information = _lint(
        tmp_path,
        {"custom_module/__init__.py": "", "custom_module/bonus.py": _BUILDER, "dags/bonus.py": _UPSERT_DAG},
    )
    # `update_time` in the row the builder returns stamps it: information; `start_time` (line 10) is
    # no stamp's name, so the clock returned in that row stays a finding
    assert [f for f in found if f[0] == "IDEM003"] == [("IDEM003", "bonus.py", 10, "upsert_window")]
    assert "IDEM003:upsert_bonus" in information


_ATTRIBUTE_DAG = (
    _ORM_HEAD
    + """\
def files():
    @task
    def mark_loaded(file_id: int):
        session = Session(ENGINE)
        row = session.get(VendorFile, file_id)
        row.status = "loaded"
        row.updated = datetime.utcnow()
        session.commit()

    @task
    def mark_due(file_id: int):
        session = Session(ENGINE)
        row = session.get(VendorFile, file_id)
        row.status = datetime.utcnow().strftime("due %Y%m%d")
        session.commit()

    mark_loaded(1) >> mark_due(2)


files()
"""
)


def test_a_stamp_named_attribute_of_a_row_is_its_stamp(tmp_path: Path) -> None:
    found, information = _lint(tmp_path, {"models.py": _MODELS, "dags/files.py": _ATTRIBUTE_DAG})
    # `updated` (line 18) is an ORM row's audit stamp: information; the clock made the row's
    # status (line 25) is data and stays a finding
    assert [f for f in found if f[0] == "IDEM003"] == [("IDEM003", "files.py", 25, "mark_due")]
    assert "IDEM003:mark_loaded" in information

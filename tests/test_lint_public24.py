"""Round 21 follow-up (issue 35, lint24, docs/lint-evaluation.md): true-but-harmless findings of the
round 21 batch turned into information, tested with small projects of hand-written files. What each
test asserts is what a reviewer reading the files would say; the first and third fail on main
70a0501, the second is a guard that passes on both.

- sul-dlss' libsys-airflow sends its report and alert e-mails through a wrapper whose recipients
  default to the developers' list (``kwargs.get("to", Variable.get("EMAIL_DEVS"))``): 28 harmless
  IDEM006 with retries=1. An e-mail whose every recipient is the team's own list (named so, or the
  DAG's ``default_args["email"]``) is information; one to an address read from the data, a literal
  address or a setting not named as the team's stays a finding.
- libsys-airflow builds ORM rows with ``DigitalBookplate(created=utcnow(), updated=utcnow(), ..)`` and
  stamps ``vendor.last_folio_update = now()``: a stamp-named keyword of a class built with keywords is
  a stamp field as a ``dict(..)`` keyword is, and ``last_<x>_update`` an audit column's name.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import lint_paths
from tests.lintfiles import explained, seen


def _lint(tmp_path: Path, files: dict[str, str]) -> tuple[list[tuple[str, int, str | None]], list[str]]:
    """(rule, line, task) of every finding, sorted; and the information's rule:task."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    report = lint_paths([tmp_path])
    found = sorted((f.rule, f.line, f.task_id) for f in seen(report))
    return found, sorted(f"{i.rule}:{i.task_id}" for i in explained(report))


_MAILS = """\
from datetime import datetime

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator
from airflow.utils.email import send_email


def send_email_with_server_name(**kwargs):
    devs_to_email_addr = Variable.get("EMAIL_DEVS")
    to_addresses = kwargs.get("to", devs_to_email_addr)
    send_email(to=to_addresses, subject=kwargs.get("subject"), html_content="done")


def email_requester(row):
    send_email(to=row["requester_email"], subject="your export", html_content="ready")


def email_hubspot():
    send_email(to=os.getenv("HUBSPOT_NOTIFICATION_EMAIL"), subject="issue", html_content="new")


def email_alert_list(default_args):
    send_email(to=[Variable.get("ALERT_EMAILS"), default_args["email"]], subject="failed", html_content="x")


with DAG("mails", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False,
         default_args={"retries": 1}) as dag:
    PythonOperator(task_id="summary", python_callable=send_email_with_server_name,
                   op_kwargs={"subject": "summary"})
    PythonOperator(task_id="alerts", python_callable=email_alert_list, op_args=[{}])
    PythonOperator(task_id="requester", python_callable=email_requester, op_args=[{}])
    PythonOperator(task_id="hubspot", python_callable=email_hubspot)
"""


def test_an_email_to_the_teams_own_list_is_information(tmp_path: Path) -> None:
    found, info = _lint(tmp_path, {"mails.py": _MAILS})
    assert ("IDEM006", 12, "summary") not in found
    assert "IDEM006:summary" in info
    assert "IDEM006:alerts" in info


def test_an_email_to_the_data_or_a_ticket_inbox_stays_a_finding(tmp_path: Path) -> None:
    found, info = _lint(tmp_path, {"mails.py": _MAILS})
    assert ("IDEM006", 16, "requester") in found and ("IDEM006", 20, "hubspot") in found
    assert "IDEM006:requester" not in info and "IDEM006:hubspot" not in info


_ORM_STAMPS = """\
import datetime

from airflow.sdk import dag, task
from sqlalchemy.orm import Session

from models import Bookplate, Vendor


@dag(schedule="@daily", start_date=datetime.datetime(2024, 1, 1), catchup=False)
def bookplates():
    @task
    def add_bookplate(druid: str):
        with Session() as session:
            session.add(
                Bookplate(
                    created=datetime.datetime.utcnow(),
                    updated=datetime.datetime.utcnow(),
                    druid=druid,
                )
            )
            session.commit()

    @task
    def sync_vendor(code: str):
        with Session() as session:
            vendor = session.query(Vendor).where(Vendor.code == code).first()
            vendor.last_folio_update = datetime.datetime.now()
            session.commit()

    add_bookplate("x")
    sync_vendor("y")


bookplates()
"""


def test_an_orm_models_stamp_keywords_and_last_x_update_are_information(tmp_path: Path) -> None:
    found, info = _lint(tmp_path, {"bookplates.py": _ORM_STAMPS})
    assert [f for f in found if f[0] == "IDEM003"] == []
    assert info.count("IDEM003:add_bookplate") == 2 and "IDEM003:sync_vendor" in info

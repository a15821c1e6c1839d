"""Round 29b (issue 35, lint38, docs/lint-evaluation.md): round 29's batch is tuning data now; the
general shapes behind its false IDEM006 findings and its SQLAlchemy Core miss, tested with small
hand-written DAG files. What each test asserts is what a reviewer reading the file would say; each case
fails on main 1f917ea (checked against main's package), and its guards (what must stay raised) are
raised there too.

- a (IDEM006): a PUT to a URL naming one resource at run time (``{base}/coveragestores/{store}/
  file.geotiff``, ``{base}/layers/ws:{layer}``, ``records/{uuid}/ownership``) replaces that resource:
  information. A PUT to a collection (``/items``, ``{id}/items``) or to ``{base}/{x}`` stays raised.
- b (IDEM006): a POST whose body carries a password and whose response is read only for a token logs
  in: no send. One whose response is read for an ``id`` (a user it created) stays raised.
- c (IDEM006): an upload whose parameters say ``uuidProcessing="OVERWRITE"`` (or ``overwrite=True``)
  replaces the record of the same id: information. ``GENERATEUUID`` stays raised.
- d (IDEM006): a POST to an endpoint named for getting (``/get-files-paths``) is a read.
- e (IDEM002, a miss): ``Table("mss_mission", metadata, schema="missions", autoload_with=engine)
  .insert().values(..)`` executed by a session or connection is an append into
  ``missions.mss_mission``; a delete of the same table first, a conflict clause, or a return when a
  lookup of it found the row (get or create) guard it.
- f (IDEM004): a Variable named for a message (``mensaje_final``), no mark or time word in its name,
  holds the last message handed on, not where a window stops: information. ``last_message`` and
  ``message_ts`` stay raised.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import lint_files, seen

_HTTP_DAG = """\
from datetime import datetime

import requests
from airflow.sdk import dag, task

BASE = "https://geo.example.org/rest"


@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def publish():
    @task(retries=2)
    def push(layer: str, data: bytes, user: str, secret: str):
{body}

    push("x", b"", "u", "p")


publish()
"""


def _http(tmp_path: Path, body: str) -> LintReport:
    text = _HTTP_DAG.format(body="\n".join("        " + line for line in body.splitlines()))
    return lint_files(tmp_path, {"dags/publish.py": text})


def _raised(report: LintReport, rule: str = "IDEM006") -> list[int]:
    return [f.line for f in seen(report) if f.rule == rule]


def _said(report: LintReport, text: str, rule: str = "IDEM006") -> list[int]:
    return [f.line for f in report.information if f.rule == rule and text in f.message]


def test_a_put_to_a_named_resource_replaces_it(tmp_path: Path) -> None:
    for body in (
        'url = f"{BASE}/workspaces/ws/coveragestores/{layer}/file.geotiff"\n'
        'requests.put(url, data=data, params={"configure": "all"})',
        'requests.put(f"{BASE}/layers/ws:{layer}", data=f"<layer><name>{layer}</name></layer>")',
        'requests.put(f"{BASE}/records/{layer}/ownership", params={"userIdentifier": user})',
    ):
        report = _http(tmp_path, body)
        assert not _raised(report), (body, report.findings)
        assert _said(report, "names one resource"), (body, report.information)


def test_a_guard_a_put_to_a_collection_stays_raised(tmp_path: Path) -> None:
    for body in (
        'requests.put(f"{BASE}/items", data=data)',
        'requests.put(f"{BASE}/layers/{layer}/items", data=data)',
        'requests.put(f"{BASE}/{layer}", data=data)',
        'requests.put(f"{BASE}/layers/{layer}/send", data=data)',
        # a dict of fields a parameter fills: `fieldsets` keeps a read-modify-write raised
        'requests.put(f"{BASE}/bug/{layer}", data={"whiteboard": user})',
    ):
        report = _http(tmp_path, body)
        assert _raised(report), (body, report.information)


def test_b_a_post_that_only_fetches_a_token_writes_nothing(tmp_path: Path) -> None:
    body = (
        'creds = {"username": user, "password": secret}\n'
        "response = requests.post(layer, json=creds)\n"
        "response.raise_for_status()\n"
        "obj = response.json()\n"
        'return [obj["accessToken"], obj["xsrfToken"], obj["setCookieHeader"]]'
    )
    report = _http(tmp_path, body)
    assert not _raised(report), report.findings


def test_b_guard_a_post_with_a_password_read_for_an_id_stays_raised(tmp_path: Path) -> None:
    for body in (
        'r = requests.post(layer, json={"username": user, "password": secret})\nreturn r.json()["id"]',
        'r = requests.post(layer, json={"username": user, "name": secret})\nreturn r.json()["token"]',
        'r = requests.post(layer, json={"username": user, "password": secret})\nreturn r.json()',
    ):
        report = _http(tmp_path, body)
        assert _raised(report), (body, report.information)


def test_c_an_upload_that_says_it_overwrites_replaces_the_record(tmp_path: Path) -> None:
    for body in (
        'params = {"uuidProcessing": "OVERWRITE"}\n'
        'requests.post(f"{BASE}/records", files={"file": data}, params=params)',
        'requests.post(f"{BASE}/upload", files={"file": data}, data={"overwrite": True})',
    ):
        report = _http(tmp_path, body)
        assert not _raised(report), (body, report.findings)
        assert _said(report, "says it overwrites"), (body, report.information)


def test_c_guard_an_upload_that_makes_a_new_id_stays_raised(tmp_path: Path) -> None:
    for body in (
        'requests.post(f"{BASE}/records", files={"file": data}, params={"uuidProcessing": "GENERATEUUID"})',
        'requests.post(f"{BASE}/upload", files={"file": data}, data={"overwrite": False})',
    ):
        report = _http(tmp_path, body)
        assert _raised(report), (body, report.information)


def test_d_a_post_to_a_get_endpoint_is_a_read(tmp_path: Path) -> None:
    url = "https://api.example.org/geo-files-locator/get-files-paths"
    body = f'r = requests.post("{url}", json=[{{"a": 1}}])\nreturn r.json()'
    report = _http(tmp_path, body)
    assert not _raised(report), report.findings
    guard = _http(tmp_path, 'requests.post("https://api.example.org/targets", json=[{"a": 1}])')
    assert _raised(guard), guard.information


_CORE_DAG = """\
from datetime import datetime

from airflow.sdk import dag, task
from sqlalchemy import MetaData, Table, create_engine
from sqlalchemy.orm import Session


@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def missions():
    @task(retries=1)
    def create_mission(fire_id: int, name: str):
        engine = create_engine("postgresql://db/ops")
        session = Session(engine)
        metadata = MetaData()
{body}
        session.commit()

    create_mission(1, "x")


missions()
"""


def _core(tmp_path: Path, body: str) -> LintReport:
    text = _CORE_DAG.format(body="\n".join("        " + line for line in body.splitlines()))
    return lint_files(tmp_path, {"dags/missions.py": text})


_TABLE = "mission = Table('mss_mission', metadata, schema='missions', autoload_with=engine)\n"


def test_e_a_core_table_insert_executed_is_an_append(tmp_path: Path) -> None:
    for body in (
        _TABLE + "stmt = mission.insert().values({'name': name})\nsession.execute(stmt)",
        _TABLE + "with engine.begin() as conn:\n    conn.execute(mission.insert().values(name=name))",
    ):
        report = _core(tmp_path, body)
        raised = [f for f in report.findings if f.rule == "IDEM002"]
        assert raised and "missions.mss_mission" in raised[0].message, (body, report.findings)


def test_e_guard_a_replace_a_lookup_or_a_conflict_clause_is_no_append(tmp_path: Path) -> None:
    for body in (
        _TABLE + "session.execute(mission.delete().where(mission.c.fire_id == fire_id))\n"
        "session.execute(mission.insert().values({'name': name, 'fire_id': fire_id}))",
        _TABLE + "found = session.execute(f'SELECT id FROM missions.mss_mission WHERE fire_id = {fire_id}')"
        ".fetchone()\nif found:\n    return found[0]\nsession.execute(mission.insert().values(name=name))",
        _TABLE + "session.execute(mission.insert().values(name=name).on_conflict_do_nothing())",
    ):
        report = _core(tmp_path, body)
        assert not [f for f in report.findings if f.rule == "IDEM002"], (body, report.findings)
    # a lookup of another table, with no return, guards nothing
    body = (
        _TABLE + "row = session.execute('SELECT status_id FROM missions.initial_status').fetchone()\n"
        "status = row.status_id if row else 1\n"
        "session.execute(mission.insert().values(name=name, status_id=status))"
    )
    assert [f for f in _core(tmp_path, body).findings if f.rule == "IDEM002"]


_STATE_DAG = """\
import json
from datetime import datetime

import requests
from airflow.models import Variable
from airflow.sdk import dag, task


@dag(schedule="*/5 * * * *", start_date=datetime(2024, 1, 1), catchup=False)
def poll():
    @task
    def poll_kafka():
        previous = json.loads(Variable.get("{key}", "{{}}"))
        path = previous.get("value", {{}}).get("path", "")
        record = {{"original": f"https://minio/{{path}}"}}
        requests.post("https://api.example.org/observations", json=record)
        Variable.set("{key}", json.dumps({{"value": {{"path": "x"}}}}))

    poll_kafka()


poll()
"""


def test_f_a_variable_named_for_a_message_is_no_watermark(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/poll.py": _STATE_DAG.format(key="mensaje_final")})
    assert not [f for f in report.findings if f.rule == "IDEM004"], report.findings
    assert [f for f in report.information if f.rule == "IDEM004" and "a message handed on" in f.message]
    # a message's mark (the last one seen, its time) is where the next poll starts
    for key in ("last_message", "message_ts"):
        guard = lint_files(tmp_path / key, {"dags/poll.py": _STATE_DAG.format(key=key)})
        assert [f for f in guard.findings if f.rule == "IDEM004"], (key, guard.information)

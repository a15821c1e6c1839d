"""Round 28 (issue 35, lint35, docs/lint-evaluation.md): shapes of earlier rounds' tuning data (not of
round 28's batch, labelled first and left as measured), tested with small hand-written DAG and SQL
files. What each test asserts is what a reviewer reading the files would say; each information case is
raised on main 0c8544e (checked against main's package), and its guards (what must stay raised) are
raised there too.

- a (IDEM001): an upsert's ``modified = CURRENT_TIMESTAMP`` whose only reader takes the newest stamp's
  rows, ``t.modified = (SELECT MAX(modified) FROM t)`` (round 27, profcomff's union-member list): a
  rerun re-stamps the same rows, which that reader takes again. A reader comparing the stamp by order
  with a MAX (a watermark), or a MAX read on its own, keeps it raised.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import lint_files

_SQL_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG("dwh", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False,
         template_searchpath=["sql"]) as dag:
{tasks}
"""

_UPSERT = """\
INSERT INTO ods_user.student_id (student_id, user_id, created, modified)
SELECT student_id, user_id, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM stg.users
ON CONFLICT (user_id, student_id) DO UPDATE SET
    student_id = EXCLUDED.student_id,
    modified = CURRENT_TIMESTAMP;
"""


def _sql(tmp_path: Path, tasks: dict[str, str]) -> LintReport:
    body = "".join(
        f'    SQLExecuteQueryOperator(task_id="{name}", conn_id="dwh", sql={sql!r})\n'
        for name, sql in tasks.items()
    )
    files = {"dags/dwh.py": _SQL_DAG.format(tasks=body), "dags/sql/upsert.sql": _UPSERT}
    return lint_files(tmp_path, files)


def _raised(report: LintReport, rule: str) -> set[str | None]:
    return {f.task_id for f in report.findings if f.rule == rule}


def test_a_the_newest_stamps_rows_read_by_equality_to_max(tmp_path: Path) -> None:
    reader = (
        "SELECT * FROM ods_user.student_id AS ud WHERE ud.is_deleted = FALSE"
        " AND ud.modified = (SELECT MAX(modified) FROM ods_user.student_id)"
    )
    report = _sql(tmp_path, {"upsert": "upsert.sql", "members": reader})
    assert not _raised(report, "IDEM001"), report.findings
    said = [f for f in report.information if f.rule == "IDEM001" and f.task_id == "upsert" and f.line == 5]
    assert said and "audit column" in said[0].message, report.information


def test_a_guard_a_watermark_on_the_stamp_keeps_it_raised(tmp_path: Path) -> None:
    # a later-than read (the rows stamped after the reader's last MAX) and a MAX read on its own are
    # marks: a rerun's new stamp moves rows into or out of what they select
    for reader in (
        "INSERT INTO dm.members SELECT * FROM ods_user.student_id AS ud"
        " WHERE ud.modified > (SELECT MAX(modified) FROM dm.members)",
        "SELECT * FROM ods_user.student_id AS ud"
        " WHERE ud.modified > (SELECT MAX(u2.modified) FROM ods_user.student_id AS u2 WHERE u2.user_id = 1)",
        "SELECT MAX(modified) FROM ods_user.student_id",
    ):
        report = _sql(tmp_path, {"upsert": "upsert.sql", "members": reader})
        raised = [f for f in report.findings if f.rule == "IDEM001" and f.task_id == "upsert"]
        assert raised and "ods_user.student_id.modified is read as a mark" in raised[0].message, (
            reader,
            report.findings,
        )


_SITES_DAG = """\
from datetime import datetime

from airflow.decorators import dag, task
from helpers import connect, sync


@dag(start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False)
def sites():
    @task(retries=2)
    def update_sites():
        sync(connect())

    update_sites()


sites()
"""

_SITES_HELPERS = """\
import psycopg2
import requests


def connect():
    return psycopg2.connect("")


def site_is_known(site_id, conn):
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM eco.sites WHERE site_id = %s;", (site_id,))
        return cur.rowcount > 0


def get_flow(cur, table, flow_id):
    cur.execute(f"SELECT id FROM {table} WHERE flow_id = %(id)s", {"id": flow_id})
    rows = cur.fetchall()
    return rows[0] if rows else None


def insert_site(conn, site_id, name):
    with conn.cursor() as cur:
        cur.execute("INSERT INTO eco.sites (site_id, name) VALUES (%s, %s)", (site_id, name))


def insert_flow(cur, table, flow_id):
    cur.execute(f"INSERT INTO {table} (flow_id) VALUES (%s)", (flow_id,))


def insert_note(conn, site_id):
    with conn.cursor() as cur:
        cur.execute("INSERT INTO eco.site_notes (site_id) VALUES (%s)", (site_id,))


def insert_log(conn, site_id):
    with conn.cursor() as cur:
        cur.execute("INSERT INTO eco.site_log (site_id) VALUES (%s)", (site_id,))


def sync(conn, table="eco.flows"):
    for site in requests.get("https://example.org/sites").json():
        if not site_is_known(site["id"], conn):
            insert_site(conn, site["id"], site["name"])  # b: a lookup of the same table
            insert_note(conn, site["id"])  # guard: another table than the lookup's
        with conn.cursor() as cur:
            found = get_flow(cur, table, site["flow"])
            if found:
                pass
            else:
                insert_flow(cur, table, site["flow"])  # b: get or create, the table an argument
        insert_log(conn, site["flow"])  # guard: the same helper unguarded here keeps it raised
"""


def test_b_an_insert_run_only_when_a_lookup_of_its_table_found_nothing(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/sites.py": _SITES_DAG, "dags/helpers.py": _SITES_HELPERS})
    raised = sorted((f.line, f.message.split(" appends")[0]) for f in report.findings if f.rule == "IDEM002")
    assert raised == [
        (_line("INSERT INTO eco.site_notes"), "INSERT INTO eco.site_notes"),
        (_line("INSERT INTO eco.site_log"), "INSERT INTO eco.site_log"),
    ], report.findings
    said = {(f.line, f.message) for f in report.information if f.rule == "IDEM002"}
    assert (
        _line("INSERT INTO eco.sites"),
        "INSERT INTO eco.sites (run only when site_is_known() finds no such row): a rerun finds the row "
        "and adds none",
    ) in said, said
    assert any(line == _line("INSERT INTO {table}") and "get_flow()" in text for line, text in said), said


def _line(text: str) -> int:
    """The line of `_SITES_HELPERS` that holds `text` (1-based)."""
    return next(n for n, line in enumerate(_SITES_HELPERS.splitlines(), 1) if text in line)


def test_b_guard_without_the_lookup_the_inserts_stay_raised(tmp_path: Path) -> None:
    unguarded = _SITES_HELPERS.replace("if not site_is_known(", "if site_is_known(").replace(
        "if found:\n                pass\n            else:\n                insert_flow",
        "if found:\n                insert_flow",
    )
    report = lint_files(tmp_path, {"dags/sites.py": _SITES_DAG, "dags/helpers.py": unguarded})
    raised = {f.message.split(" appends")[0] for f in report.findings if f.rule == "IDEM002"}
    assert raised == {
        "INSERT INTO eco.sites",
        "INSERT INTO eco.flows",
        "INSERT INTO eco.site_notes",
        "INSERT INTO eco.site_log",
    }, raised

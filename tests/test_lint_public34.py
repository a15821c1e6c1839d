"""Round 27c (issue 35, lint34, docs/lint-evaluation.md): the rest of round 27's harmless findings
(tuning data now), tested with small hand-written DAG and SQL files. What each test asserts is what a
reviewer reading the files would say; each information case is raised on main 36170c0 (checked against
main's package), and its guards (what must stay raised) are raised there too.

- a (IDEM006): a PATCH or PUT of a dict of field values to a URL ending in one object's id sets those
  fields; sent again, they take the same values. POST, a list body, an operation key, a value built by
  ``+`` or a list read and appended to stay raised.
- b (IDEM001): a MERGE's ``WHEN NOT MATCHED THEN INSERT (.., loaded_dttm) VALUES (.., now())`` is a
  load stamp of rows written by key; an append's load stamp stays raised.
- c (IDEM001): an upsert's ``modified = CURRENT_TIMESTAMP`` whose column no reader filters on: another
  table's ``MAX(modified)`` read in a subquery is that table's, not this one's. The same table's read
  keeps it raised.
- d (IDEM001): randomness of an insert that takes only the rows its own target does not hold yet (a
  LEFT JOIN anti-join, NOT EXISTS, an SCD2 increment's changed rows). A plain insert, an anti-join
  against another table, or an extra branch that is no change test stay raised.
- e (IDEM003): ``uuid4()`` ids in Python of a task that empties whole every table it writes; a task
  that deletes only a window, or also sends a request, keeps its IDEM003.
- f (IDEM003): the parse-time date naming a backup copy's table (``f"{backups_dataset}.{t}_{date}"``);
  the same date naming a production table stays raised.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from airflow_idempotent.lint import LintReport
from airflow_idempotent.lint.report import RuleFinding
from tests.lintfiles import explained, lint_files, seen

_SQL_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG("dwh", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False,
         template_searchpath=["sql"]) as dag:
{tasks}
"""


def _sql(tmp_path: Path, tasks: dict[str, str], files: dict[str, str] | None = None) -> LintReport:
    body = "".join(
        f'    SQLExecuteQueryOperator(task_id="{name}", conn_id="dwh", sql={sql!r})\n'
        for name, sql in tasks.items()
    )
    return lint_files(tmp_path, {"dags/dwh.py": _SQL_DAG.format(tasks=body), **(files or {})})


def _tasks(found: Iterable[RuleFinding], rule: str) -> set[str | None]:
    return {f.task_id for f in found if f.rule == rule}


_SENDS = """\
from datetime import datetime, timedelta

import requests as r
from airflow import DAG
from airflow.decorators import task

BASE = "https://api.example.org/auth/"


def groups_of(user_id):
    return r.get(BASE + f"user/{user_id}", params={"info": "groups"}).json()["groups"]


with DAG("sends", start_date=datetime(2025, 9, 1), schedule="@daily", catchup=False,
         default_args={"retries": 3, "retry_delay": timedelta(minutes=5)}):

    @task
    def drop_from_group(users: list):
        for user_id in users:
            kept = [g for g in groups_of(user_id) if g != 22]
            data = {"groups": kept}
            r.patch(url=BASE + f"user/{user_id}", json=data)

    @task
    def put_profile(user_id: int):
        name = r.get(f"https://api.example.org/people/{user_id}").json()["name"]
        r.put(f"https://api.example.org/profiles/{user_id}", json={"name": name, "active": True})

    @task
    def put_handed_in(user_id: int, whiteboard: str):
        def update(bug_id, new_whiteboard):
            payload = {"whiteboard": new_whiteboard}
            r.put(f"https://api.example.org/bug/{bug_id}", data=payload)

        update(user_id, (whiteboard + " [tag]").strip())

    @task
    def post_profile(user_id: int, name: str):
        r.post(f"https://api.example.org/profiles/{user_id}", json={"name": name})

    @task
    def add_to_group(users: list):
        for user_id in users:
            groups = groups_of(user_id)
            groups.append(22)
            r.patch(BASE + f"user/{user_id}", json={"groups": groups})

    @task
    def raise_balance(account_id: int, balance: float):
        r.patch(f"https://api.example.org/accounts/{account_id}", json={"balance": balance + 10})

    @task
    def json_patch(user_id: int):
        r.patch(f"https://api.example.org/users/{user_id}", json=[{"op": "add", "path": "/g", "value": 1}])

    @task
    def increment(user_id: int):
        r.patch(f"https://api.example.org/users/{user_id}", json={"op": "increment", "field": "visits"})

    @task
    def bulk_import(rows: list):
        r.patch(url="https://api.example.org/lecturer/import_rating", json=rows)

    drop_from_group([1]) >> put_profile(1) >> post_profile(1, "a") >> add_to_group([1])
    put_handed_in(1, "old" + " [tag]")
    raise_balance(1, 1.0) >> json_patch(1) >> increment(1) >> bulk_import([])
"""


def test_a_a_patch_or_put_of_field_values_to_one_object(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/sends.py": _SENDS})
    info = {f.task_id: f.message for f in explained(report) if f.rule == "IDEM006"}
    assert set(info) == {"drop_from_group", "put_profile"}, explained(report)
    assert "sets named fields ('groups') of one object" in info["drop_from_group"]
    assert "ending in {user_id}" in info["put_profile"]
    # guards: a POST, a list read and appended to, a value built by `+`, a JSON Patch list, an
    # operation key, a list of records to an import endpoint, and a value handed in are still sends
    assert _tasks(seen(report), "IDEM006") == {
        "put_handed_in",
        "post_profile",
        "add_to_group",
        "raise_balance",
        "json_patch",
        "increment",
        "bulk_import",
    }, seen(report)


def test_b_a_merge_load_stamp_of_rows_inserted_when_not_matched(tmp_path: Path) -> None:
    merge = (
        "MERGE INTO dm.incident AS ne USING (SELECT name, ts FROM ods.log) AS e "
        "ON ne.name = e.name AND ne.ts = e.ts WHEN NOT MATCHED THEN "
        "INSERT (id, msk_record_loaded_dttm, name, ts) VALUES (DEFAULT, now(), e.name, e.ts)"
    )
    report = _sql(
        tmp_path,
        {
            "merge": merge,
            # guard: an append's load stamp stamps new rows (IDEM002's own, still reported)
            "append": "INSERT INTO dm.log_copy (name, loaded_dttm) SELECT name, now() FROM ods.log",
            # guard: the clock as a value of the data, not a stamp column
            "valid_from": merge.replace("msk_record_loaded_dttm", "valid_from").replace(
                "dm.incident", "dm.v"
            ),
        },
    )
    assert _tasks(seen(report), "IDEM001") == {"append", "valid_from"}, seen(report)
    said = [f for f in explained(report) if f.rule == "IDEM001" and f.task_id == "merge"]
    assert said and "msk_record_loaded_dttm" in said[0].message, explained(report)


_UPSERT = """\
INSERT INTO ods_user.academic_group (grp, user_id, created, modified)
SELECT grp, user_id, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM stg.users
ON CONFLICT (user_id, grp) DO UPDATE SET
    grp = EXCLUDED.grp,
    modified = CURRENT_TIMESTAMP;
"""
_READER = """\
SELECT * FROM ods_user.{table} AS ud
WHERE ud.is_deleted = FALSE AND ud.modified = (SELECT MAX(modified) FROM ods_user.{table})
"""


def test_c_an_upsert_audit_column_another_tables_max_does_not_read(tmp_path: Path) -> None:
    report = _sql(
        tmp_path,
        {"upsert": "upsert.sql", "read": _READER.format(table="student_id")},
        {"dags/sql/upsert.sql": _UPSERT},
    )
    assert not [f for f in seen(report) if f.rule == "IDEM001"], seen(report)
    said = [f for f in explained(report) if f.rule == "IDEM001" and f.task_id == "upsert" and f.line == 5]
    assert said and "audit column" in said[0].message, explained(report)


def test_c_guard_the_same_tables_max_read_keeps_it_raised(tmp_path: Path) -> None:
    # lint35: a MAX matched by equality (the newest stamp's rows) is information since
    # (test_lint_public35); the same table's stamp compared by order with a MAX stays a mark
    reader = (
        "SELECT * FROM ods_user.academic_group AS ud"
        " WHERE ud.modified > (SELECT MAX(modified) FROM dm.academic_group_seen)"
    )
    report = _sql(tmp_path, {"upsert": "upsert.sql", "read": reader}, {"dags/sql/upsert.sql": _UPSERT})
    raised = [f for f in seen(report) if f.rule == "IDEM001"]
    assert {f.task_id for f in raised} == {"upsert"}, seen(report)
    assert "ods_user.academic_group.modified is read as a mark" in raised[0].message


_SCD2 = """\
INSERT INTO dwh.lecturer (uuid, api_id, name, valid_from_dt, valid_to_dt)
SELECT gen_random_uuid(), ods.api_id, ods.name, '{{ ds }}'::date, NULL
FROM ods.lecturer AS ods
LEFT JOIN dwh.lecturer AS dwh ON ods.api_id = dwh.api_id AND dwh.valid_to_dt IS NULL
WHERE dwh.api_id IS NULL OR (ods.api_id = dwh.api_id AND ods.name IS DISTINCT FROM dwh.name)
"""


def test_d_randomness_of_rows_the_target_does_not_hold_yet(tmp_path: Path) -> None:
    report = _sql(
        tmp_path,
        {
            "scd2": _SCD2,
            "anti_join": "INSERT INTO d.t (id, a) SELECT gen_random_uuid(), s.a FROM s "
            "LEFT JOIN d.t AS t ON s.a = t.a WHERE t.a IS NULL",
            "not_exists": "INSERT INTO d.u (id, a) SELECT gen_random_uuid(), s.a FROM s "
            "WHERE NOT EXISTS (SELECT 1 FROM d.u WHERE d.u.a = s.a)",
            # guards: no anti-join; one against another table; a branch that is no change test
            "plain": "INSERT INTO d.p (id, a) SELECT gen_random_uuid(), a FROM s",
            "other": "INSERT INTO d.o (id, a) SELECT gen_random_uuid(), s.a FROM s "
            "LEFT JOIN d.elsewhere AS e ON s.a = e.a WHERE e.a IS NULL",
            "or_other": "INSERT INTO d.q (id, a) SELECT gen_random_uuid(), s.a FROM s "
            "LEFT JOIN d.q AS q ON s.a = q.a WHERE q.a IS NULL OR s.b > 1",
        },
    )
    assert _tasks(seen(report), "IDEM001") == {"plain", "other", "or_other"}, seen(report)
    info = {f.task_id for f in explained(report) if f.rule == "IDEM001" and "does not hold yet" in f.message}
    assert info == {"scd2", "anti_join", "not_exists"}, explained(report)


_PARSE = """\
import uuid
from datetime import datetime, timedelta

import pandas as pd
import requests
from airflow import DAG
from airflow.decorators import task
from airflow.providers.postgres.hooks.postgres import PostgresHook

with DAG("parse", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False,
         default_args={"retries": 3, "retry_delay": timedelta(minutes=5)}):

    @task
    def reload_whole():
        hook = PostgresHook(postgres_conn_id="dwh")
        hook.run('DELETE FROM "ODS_TIMETABLE".ods_timetable_act')
        frame = pd.DataFrame({"name": ["a", "b"]})
        frame["id"] = [uuid.uuid4() for _ in range(len(frame.index))]
        frame.to_sql("ods_timetable_act", schema="ODS_TIMETABLE", con=hook.get_sqlalchemy_engine(),
                     if_exists="append", index=False)

    @task
    def reload_window(ds=None):
        hook = PostgresHook(postgres_conn_id="dwh")
        hook.run("DELETE FROM ods.events WHERE day = %(ds)s", parameters={"ds": ds})
        frame = pd.DataFrame({"day": [ds]})
        frame["id"] = [uuid.uuid4() for _ in range(len(frame.index))]
        frame.to_sql("events", schema="ods", con=hook.get_sqlalchemy_engine(), if_exists="append",
                      index=False)

    @task
    def reload_and_send():
        hook = PostgresHook(postgres_conn_id="dwh")
        hook.run("DELETE FROM ods.items")
        frame = pd.DataFrame({"name": ["a"]})
        frame["id"] = [uuid.uuid4() for _ in range(len(frame.index))]
        frame.to_sql("items", schema="ods", con=hook.get_sqlalchemy_engine(), if_exists="append",
                     index=False)
        requests.post("https://api.example.org/items", json=frame["name"].tolist())

    reload_whole() >> reload_window() >> reload_and_send()
"""


def test_e_python_random_ids_of_a_task_that_reloads_its_table_whole(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/parse.py": _PARSE})
    # round 36e (lint60): a random id used whole is information before the reload is asked
    info = [f for f in report.information if f.rule == "IDEM003" and f.task_id == "reload_whole"]
    assert info and "never built into a name" in info[0].message.lower()
    assert info[0].line == 18
    # guards: a window's delete, and a task that also sends a request, keep their IDEM003
    # (since round 36e their random ids, used whole, are information too: still seen)
    assert {"reload_window", "reload_and_send"} <= _tasks(seen(report), "IDEM003"), seen(report)


_BACKUPS = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.google.cloud.transfers.bigquery_to_bigquery import BigQueryToBigQueryOperator

production_dataset = "{prod}"
backups_dataset = f"{{production_dataset}}_backups"

with DAG("{dag_id}", start_date=datetime(2024, 1, 1), schedule="@weekly", catchup=False) as dag:
    curr_date = datetime.now().strftime("%Y%m%d")
    for table in ["visualization_data", "paper_data"]:
        BigQueryToBigQueryOperator(
            task_id=f"back_up_{{table}}",
            source_project_dataset_tables=[f"staging.{{table}}"],
            destination_project_dataset_table=f"{{{target}}}.{{table}}_{{curr_date}}",
            create_disposition="CREATE_IF_NEEDED",
            write_disposition="WRITE_TRUNCATE",
        )
"""


def test_f_the_parse_date_naming_a_backup_copys_table(tmp_path: Path) -> None:
    report = lint_files(
        tmp_path / "backup",
        {"dags/b.py": _BACKUPS.format(prod="parat", dag_id="backup", target="backups_dataset")},
    )
    assert not [f for f in seen(report) if f.rule == "IDEM003"], seen(report)
    info = [f for f in explained(report) if f.rule == "IDEM003" and f.line == 10]
    assert info and "backup table's name" in info[0].message, explained(report)
    # guard: the same date naming a production table places the data: still a finding
    guard = lint_files(
        tmp_path / "prod",
        {"dags/p.py": _BACKUPS.format(prod="parat", dag_id="prod", target="production_dataset")},
    )
    assert [(f.rule, f.line) for f in seen(guard) if f.rule == "IDEM003"] == [("IDEM003", 10)]

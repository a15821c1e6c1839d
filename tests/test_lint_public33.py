"""Round 27b (issue 35, lint33, docs/lint-evaluation.md): round 27's harmless randomness (tuning data
now), tested with small hand-written DAG and SQL files. What each test asserts is what a reviewer
reading the files would say; each test's information case is raised as IDEM001 on main ab91531, and its
guards (what must stay raised) are raised there too.

- a: a random surrogate id (``gen_random_uuid()``, ``NEWID()``, ``GENERATE_UUID()``) in an INSERT or
  CTAS whose target the same task or SQL file replaces whole first (TRUNCATE, DELETE without WHERE,
  DROP then CREATE, CREATE OR REPLACE, DELETE of the constant slice it writes): information.
- b: randomness in an ``INSERT .. ON CONFLICT DO NOTHING`` / ``INSERT IGNORE``: a rerun keeps the
  first row: information.
- guards: a DELETE of the run's window then random ids (joined keys of that window change on a rerun)
  and a clock read stay IDEM001.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from airflow_idempotent.lint import LintReport
from airflow_idempotent.lint.report import RuleFinding
from tests.lintfiles import explained, lint_files, seen

_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG("reload", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False,
         template_searchpath=["sql"]) as dag:
{tasks}
"""


def _task(name: str, sql: str) -> str:
    return f'    SQLExecuteQueryOperator(task_id="{name}", conn_id="dwh", sql={sql!r})\n'


def _lint(tmp_path: Path, tasks: dict[str, str], files: dict[str, str] | None = None) -> LintReport:
    body = "".join(_task(name, sql) for name, sql in tasks.items())
    return lint_files(tmp_path, {"dags/reload.py": _DAG.format(tasks=body), **(files or {})})


def _rows(found: Iterable[RuleFinding]) -> set[tuple[str, str | None]]:
    return {(f.rule, f.task_id) for f in found}


def test_a_random_ids_of_a_table_reloaded_whole(tmp_path: Path) -> None:
    report = _lint(
        tmp_path,
        {
            "truncated": "TRUNCATE o.act; INSERT INTO o.act SELECT gen_random_uuid() AS id, a FROM stg.a",
            "deleted": "DELETE FROM o.comment; INSERT INTO o.comment (id, t) SELECT NEWID(), t FROM stg.c",
            "dropped": "DROP TABLE IF EXISTS d.t; CREATE TABLE d.t AS SELECT uuid_generate_v4() AS id FROM s",
            "replaced": "CREATE OR REPLACE TABLE d.links AS SELECT GENERATE_UUID() AS id, x FROM s",
            # profcomff's own-slice reload: the DELETE's literal is the one the INSERT writes
            "slice": "DELETE FROM dm.dim_event WHERE source_name = 'api'; INSERT INTO dm.dim_event "
            "(id, name, source_name) SELECT gen_random_uuid(), name, 'api' AS source_name FROM stg.e",
            "file": "reload_file.sql",
        },
        {"dags/sql/reload_file.sql": "TRUNCATE o.i;\nINSERT INTO o.i\nSELECT gen_random_uuid() FROM s;\n"},
    )
    assert not [f for f in seen(report) if f.rule == "IDEM001"], seen(report)
    info = {f.task_id for f in explained(report) if f.rule == "IDEM001" and "reloaded whole" in f.message}
    assert info == {"truncated", "deleted", "dropped", "replaced", "slice", "file"}, explained(report)
    said = next(f for f in explained(report) if f.task_id == "file")
    assert (Path(said.file).name, said.line) == ("reload_file.sql", 3)
    assert "keys that other tables join on would change" in said.message


def test_b_randomness_under_on_conflict_do_nothing_or_insert_ignore(tmp_path: Path) -> None:
    report = _lint(
        tmp_path,
        {
            "keys": "INSERT INTO stg.info_keys SELECT id, encode(gen_random_bytes(16), 'base64') "
            "FROM stg.users ON CONFLICT DO NOTHING",
            "ignore": "INSERT IGNORE INTO app.tokens SELECT id, UUID() FROM app.users",
            "named": "INSERT INTO k.u (id, token) SELECT id, gen_random_uuid() FROM s "
            "ON CONFLICT (id) DO NOTHING",
        },
    )
    assert not [f for f in seen(report) if f.rule == "IDEM001"], seen(report)
    info = {f.task_id for f in explained(report) if f.rule == "IDEM001" and "first row" in f.message}
    assert info == {"keys", "ignore", "named"}, explained(report)


def test_guards_a_window_reload_a_clock_read_and_other_slices_stay_raised(tmp_path: Path) -> None:
    report = _lint(
        tmp_path,
        {
            # only the window is replaced: its ids change on a rerun, the other days' keep theirs
            "window": "DELETE FROM f.sales WHERE day = '{{ ds }}'; "
            "INSERT INTO f.sales SELECT gen_random_uuid(), * FROM s WHERE day = '{{ ds }}'",
            # a reload whole, but the clock read is the value written (as before)
            "clock": "TRUNCATE r.snap; INSERT INTO r.snap SELECT x, now() AS taken FROM s",
            # the slice deleted is not the one written
            "other": "DELETE FROM dm.dim WHERE source_name = 'api'; "
            "INSERT INTO dm.dim (id, source_name) SELECT gen_random_uuid(), 'csv' AS source_name FROM s",
            # an upsert that updates keeps no first row
            "upsert": "INSERT INTO k.t SELECT id, gen_random_uuid() FROM s "
            "ON CONFLICT (id) DO UPDATE SET token = excluded.token",
            # the random value is the conflict key (named, or the leading column): it never conflicts
            "keyed_on_random": "INSERT INTO k.s (k, v) SELECT gen_random_uuid(), v FROM s "
            "ON CONFLICT (k) DO NOTHING",
            "leading": "INSERT INTO k.l SELECT gen_random_uuid(), v FROM s ON CONFLICT DO NOTHING",
            # another table was truncated
            "elsewhere": "TRUNCATE a.x; INSERT INTO a.y SELECT gen_random_uuid(), v FROM s",
        },
    )
    raised = _rows(f for f in seen(report) if f.rule == "IDEM001")
    assert raised == {
        ("IDEM001", t)
        for t in ("window", "clock", "other", "upsert", "elsewhere", "keyed_on_random", "leading")
    }, raised

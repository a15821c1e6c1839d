"""The linter's round-16 change (issue 35, docs/lint-evaluation.md): the clock written as a stamp
field of a record or document a task writes (`docstamps`), tested with a few hand-written lines;
what each test asserts is what a reviewer would say of the snippet, worked out by hand:

- ``{"updated_at": now()}`` in a document the task indexes, ``row["loaded_at"] = now_ms()`` through a
  helper that only returns the clock, and ``inserted_at = now(); make_row(doc, inserted_at)`` stamp
  what the task writes: information, unless the repository reads that field as a mark;
- the same stamp read back as a mark (a search query's ``range`` on it, SQL comparing it by order)
  stays IDEM003;
- a clock value under a field not named as a stamp, or also used elsewhere, stays IDEM003.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import RuleFinding
from tests.lintfiles import lint_files


def _at(entries: list[RuleFinding], rule: str) -> list[tuple[str, int, str | None]]:
    return sorted((Path(f.file).name, f.line, f.task_id) for f in entries if f.rule == rule)


_HEAD = (
    "from datetime import datetime\n"  # 1
    "from airflow.sdk import DAG, task\n"
)


def _dag(body: str) -> str:
    return (
        _HEAD
        + body
        + (
            "with DAG('d', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
            "    index_docs()\n"
        )
    )


def test_clock_in_a_document_stamp_field_is_information(tmp_path: Path) -> None:
    dag = _dag(
        "@task\n"  # 3
        "def index_docs():\n"
        "    client = get_client()\n"  # 5
        "    docs = [{'_index': 'issues', '_source': {'search_key': {'owner': o,\n"
        "             'updated_at': int(datetime.now().timestamp() * 1000)}}} for o in owners()]\n"  # 7
        "    bulk(client, docs)\n"
    )
    report = lint_files(tmp_path, {"dag.py": dag})
    assert _at(report.findings, "IDEM003") == []
    assert _at(report.information, "IDEM003") == [("dag.py", 7, "index_docs")]


def test_stamp_through_a_helper_and_a_local_named_as_the_stamp(tmp_path: Path) -> None:
    lib = (
        "from datetime import datetime\n"  # 1
        "def now_ms():\n"
        "    return int(datetime.now().timestamp() * 1000)\n"  # 3
    )
    dag = _dag(
        "from util.base import now_ms\n"  # 3
        "def make_row(doc, inserted_at):\n"
        "    return {'id': doc['id'], 'ck_data_insert_at': inserted_at}\n"  # 5
        "@task\n"
        "def index_docs():\n"
        "    rows = []\n"
        "    ck_data_insert_at = now_ms()\n"  # 9
        "    for doc in fetch():\n"
        "        rows.append(make_row(doc, ck_data_insert_at))\n"
        "    extra = {'id': 0}\n"
        "    extra['ck_data_insert_at'] = now_ms()\n"  # 13
        "    ck.execute('INSERT INTO rows_ck (*) VALUES', rows + [extra])\n"
    )
    report = lint_files(tmp_path, {"util/__init__.py": "", "util/base.py": lib, "dag.py": dag})
    assert _at(report.findings, "IDEM003") == []
    assert ("base.py", 3, "index_docs") in _at(report.information, "IDEM003")


def test_stamp_read_back_by_a_range_query_stays_a_finding(tmp_path: Path) -> None:
    dag = (
        _dag(
            "@task\n"  # 3
            "def index_docs():\n"
            "    docs = [{'_source': {'updated_at': datetime.now().isoformat(), 'n': n}} for n in f()]\n"  # 5
            "    bulk(get_client(), docs)\n"
            "@task\n"
            "def copy_new(since):\n"
            "    q = {'query': {'range': {'_source.updated_at': {'gte': since}}}}\n"  # 9
            "    return scan(get_client(), query=q)\n"
        )
        + "    copy_new('{{ ds }}')\n"
    )
    report = lint_files(tmp_path, {"dag.py": dag})
    assert _at(report.findings, "IDEM003") == [("dag.py", 5, "index_docs")]


def test_stamp_read_back_by_sql_stays_a_finding(tmp_path: Path) -> None:
    dag = (
        _dag(
            "@task\n"  # 3
            "def index_docs():\n"
            "    rows = [{'id': n, 'loaded_at': datetime.now()} for n in fetch()]\n"  # 5
            "    insert_rows('events', rows)\n"
            "@task\n"
            "def feed():\n"
            "    hook.run(\"SELECT * FROM events WHERE loaded_at > '{{ data_interval_start }}'\")\n"
        )
        + "    feed()\n"
    )
    report = lint_files(tmp_path, {"dag.py": dag})
    assert ("dag.py", 5, "index_docs") in _at(report.findings, "IDEM003")


def test_clock_under_another_field_or_also_used_elsewhere_stays_a_finding(tmp_path: Path) -> None:
    dag = _dag(
        "@task\n"  # 3
        "def index_docs():\n"
        "    day = datetime.now()\n"  # 5
        "    docs = [{'day': day, 'n': n} for n in fetch()]\n"
        "    bulk(get_client(), docs)\n"
        "    stamp = datetime.now()\n"  # 8
        "    bulk(get_client(), [{'updated_at': stamp}], since=stamp)\n"
    )
    report = lint_files(tmp_path, {"dag.py": dag})
    assert _at(report.findings, "IDEM003") == [("dag.py", 5, "index_docs")]
    assert _at(report.information, "IDEM003") == []

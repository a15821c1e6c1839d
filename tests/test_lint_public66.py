"""Round 36h of issue 35 (lint66, docs/lint-evaluation.md): two shapes the held-out test of rounds
37-40 found.

(1) A repository script a task runs with a subcommand (``python scripts/etl.py load --date {{ ds }}``)
that dispatches on it: argparse subparsers read by ``if args.command == "load":``, by
``set_defaults(func=load)`` or by a dict of commands, ``match args.command``, a click group's
``@cli.command()``, ``if sys.argv[1] == "load":``. The task's code is the script's module-level code
and the chosen subcommand's branch (and what they call), not every subcommand's: the task running
``load`` appends (IDEM002), the one running ``notify`` posts an order with retries (IDEM006), neither
has the other's finding. A subcommand known only at run time, or a first argument that is no declared
subcommand, keeps today's reading (the whole script).

(2) An INSERT a helper runs only when a SELECT of the same table by the same key found nothing, the
SELECT read by the cursor's fetch (``cur.execute("SELECT ..")`` then ``rows = cur.fetchall()``,
``if rows: .. else: INSERT``; ``cur.fetchone() is None``; ``count(*) == 0``; ``EXISTS``; the key in a
join's ON): a lookup first, a rerun finds the row and inserts nothing, so the insert is information,
not IDEM002. A SELECT of another table, or of the same table by a column the INSERT does not write,
or the insert on the branch where the row was found, stays an append.

Lines are counted by hand in the files below. On main 8e2ccbc 16 of these 26 tests fail; the ten that
pass there are the ``*_counter`` tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_idempotent.lint import LintReport
from tests.lintfiles import finding_rows, lint_files

# (1) a script's subcommands ------------------------------------------------------------------------

#: the two subcommands' code: an append at line 10 (``load``), an order POSTed at line 14 (``notify``)
_FUNCTIONS = """\
import argparse
import sys

import click
import psycopg2
import requests


def load(day=None):
    psycopg2.connect("dbname=dw").cursor().execute("INSERT INTO sales.daily SELECT * FROM staging.orders")


def notify(day=None):
    requests.post("https://api.example.com/orders", json={"day": day})

"""
_LOAD = ("IDEM002", "etl.py", 10)
_NOTIFY = ("IDEM006", "etl.py", 14)

#: how the script dispatches on its first argument, each after `_FUNCTIONS`
_DISPATCHES = {
    "argparse_if_chain_in_main": """
def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("load").add_argument("--date")
    sub.add_parser("notify").add_argument("--date")
    args = parser.parse_args()
    if args.command == "load":
        load(args.date)
    elif args.command == "notify":
        notify(args.date)


if __name__ == "__main__":
    main()
""",
    "argparse_set_defaults": """
parser = argparse.ArgumentParser()
sub = parser.add_subparsers()
p = sub.add_parser("load")
p.add_argument("--date")
p.set_defaults(func=load)
sub.add_parser("notify").set_defaults(func=notify)
args = parser.parse_args()
args.func(args)
""",
    "dict_of_commands": """
COMMANDS = {"load": load, "notify": notify}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]]()
""",
    "sys_argv_test": """
if __name__ == "__main__":
    command = sys.argv[1]
    if command == "load":
        load()
    elif command == "notify":
        notify()
""",
    "match_in_main": """
def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("load")
    sub.add_parser("notify")
    args = parser.parse_args()
    match args.cmd:
        case "load":
            load()
        case "notify":
            notify()


if __name__ == "__main__":
    sys.exit(main())
""",
    "click_group": """
@click.group()
def cli():
    pass


@cli.command(name="load")
def load_command():
    load()


@cli.command()
def notify():
    requests.post("https://api.example.com/orders", json={})


if __name__ == "__main__":
    cli()
""",
}

_DAG = """\
import subprocess
from datetime import datetime

from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.operators.python import PythonOperator
from airflow.providers.docker.operators.docker import DockerOperator
from airflow.providers.ssh.operators.ssh import SSHOperator


def run_load(**context):
    subprocess.run(["python3", "/opt/airflow/dags/scripts/etl.py", "load", context["ds"]], check=True)


ARGS = {"retries": 2}

with DAG("etl", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False, default_args=ARGS):
    {load}
    BashOperator(task_id="notify", bash_command="cd /opt/airflow/dags && python scripts/etl.py notify")
"""

_RUNNERS = {
    "bash": 'BashOperator(task_id="load", '
    'bash_command="python /opt/airflow/dags/scripts/etl.py load --date {{ ds }}")',
    "ssh": 'SSHOperator(task_id="load", ssh_conn_id="etl", '
    'command="python3 -u scripts/etl.py load {{ ds }}")',
    "docker": 'DockerOperator(task_id="load", image="etl", command="python scripts/etl.py load -d {{ ds }}")',
    "subprocess": 'PythonOperator(task_id="load", python_callable=run_load)',
}


def _script_rows(report: LintReport) -> list[tuple[str, str, int, str | None]]:
    return finding_rows(report)  # one row per task reaching a code site (round 36g groups sites)


def _lint_etl(tmp_path: Path, load: str, dispatch: str) -> LintReport:
    dag = _DAG.replace("{load}", load)
    return lint_files(tmp_path, {"dags/etl_dag.py": dag, "dags/scripts/etl.py": _FUNCTIONS + dispatch})


@pytest.mark.parametrize("dispatch", sorted(_DISPATCHES))
def test_1_each_task_reads_only_its_subcommand(tmp_path: Path, dispatch: str) -> None:
    report = _lint_etl(tmp_path, _RUNNERS["bash"], _DISPATCHES[dispatch])
    if dispatch == "click_group":  # its notify command posts at its own line (line 29 of the script)
        assert _script_rows(report) == [(*_LOAD, "load"), ("IDEM006", "etl.py", 29, "notify")]
    else:
        assert _script_rows(report) == [(*_LOAD, "load"), (*_NOTIFY, "notify")]


@pytest.mark.parametrize("runner", sorted(_RUNNERS))
def test_1_each_runner_passes_its_subcommand(tmp_path: Path, runner: str) -> None:
    report = _lint_etl(tmp_path, _RUNNERS[runner], _DISPATCHES["argparse_if_chain_in_main"])
    assert _script_rows(report) == [(*_LOAD, "load"), (*_NOTIFY, "notify")]


@pytest.mark.parametrize(
    "command",
    [
        "python /opt/airflow/dags/scripts/etl.py {{ params.command }} --date {{ ds }}",  # run time
        "python /opt/airflow/dags/scripts/etl.py $COMMAND",  # a shell variable
        "python /opt/airflow/dags/scripts/etl.py --date {{ ds }}",  # no subcommand named
        "python /opt/airflow/dags/scripts/etl.py reload",  # no such subcommand declared
    ],
)
def test_1_an_unknown_subcommand_reads_the_whole_script_counter(tmp_path: Path, command: str) -> None:
    """The task running an unknown subcommand gets both subcommands' findings, as before round 36h."""
    load = f'BashOperator(task_id="load", bash_command="{command}")'
    report = _lint_etl(tmp_path, load, _DISPATCHES["argparse_if_chain_in_main"])
    assert [row for row in _script_rows(report) if row[3] == "load"] == [(*_LOAD, "load"), (*_NOTIFY, "load")]


#: both subcommands' findings for both tasks: the whole script is each task's code
_BOTH_FOR_BOTH = [(*_LOAD, "load"), (*_LOAD, "notify"), (*_NOTIFY, "load"), (*_NOTIFY, "notify")]


def test_1_a_script_without_subcommands_is_read_whole_counter(tmp_path: Path) -> None:
    """``load`` as a plain argument of a script that declares no subcommand: both calls run, for
    both tasks."""
    script = '\nif __name__ == "__main__":\n    load(sys.argv[1])\n    notify(sys.argv[1])\n'
    assert _script_rows(_lint_etl(tmp_path, _RUNNERS["bash"], script)) == _BOTH_FOR_BOTH


def test_1_another_test_spelling_a_command_is_no_dispatch_counter(tmp_path: Path) -> None:
    """``if os.environ["MODE"] == "notify":`` compares no argument of the command: both branches may run."""
    script = (
        "\nimport os\n\nparser = argparse.ArgumentParser()\nsub = parser.add_subparsers(dest='command')\n"
        "sub.add_parser('load')\nsub.add_parser('notify')\nargs = parser.parse_args()\n"
        "load()\nif os.environ['MODE'] == 'notify':\n    notify()\n"
    )
    assert _script_rows(_lint_etl(tmp_path, _RUNNERS["bash"], script)) == _BOTH_FOR_BOTH


# (2) an INSERT run only when a SELECT of its key found nothing --------------------------------------

_HELPER_HEAD = """\
from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook


def record_file(name, folder):
    conn = PostgresHook("meta").get_conn()
    cur = conn.cursor()
"""

_HELPER_TAIL = """    conn.commit()


with DAG("files", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False):
    PythonOperator(task_id="record", python_callable=record_file, op_args=["a.csv", "in"])
"""

#: each guarded INSERT, with the line it is written at (the head is lines 1-10)
_GUARDED = {
    "fetchall_else": (
        """    cur.execute(f"SELECT name_file FROM files.files WHERE name_file = '{name}'")
    rows = cur.fetchall()
    if rows:
        print("known")
    else:
        cur.execute(f"INSERT INTO files.files (name_file, folder) VALUES ('{name}', '{folder}')")
""",
        16,
    ),
    "fetchone_is_none": (
        """    cur.execute("SELECT id FROM files.files WHERE name_file = %s", (name,))
    if cur.fetchone() is None:
        cur.execute("INSERT INTO files.files (name_file, folder) VALUES (%s, %s)", (name, folder))
""",
        13,
    ),
    "count_is_zero": (
        """    cur.execute("SELECT count(*) FROM files.files WHERE name_file = %s", (name,))
    count = cur.fetchone()[0]
    if count == 0:
        cur.execute("INSERT INTO files.files (name_file, folder) VALUES (%s, %s)", (name, folder))
""",
        14,
    ),
    "exists_not": (
        """    cur.execute("SELECT EXISTS (SELECT 1 FROM files.files WHERE name_file = %s)", (name,))
    exists = cur.fetchone()[0]
    if not exists:
        cur.execute("INSERT INTO files.files (name_file, folder) VALUES (%s, %s)", (name, folder))
""",
        14,
    ),
    "len_rows_zero": (
        """    rows = cur.execute("SELECT id FROM files.files WHERE name_file = %s", (name,)).fetchall()
    if len(rows) == 0:
        cur.execute("INSERT INTO files.files (name_file, folder) VALUES (%s, %s)", (name, folder))
""",
        13,
    ),
    "key_in_join_on": (
        """    cur.execute(
        "SELECT f.name_file FROM files.files f JOIN files.folders c ON f.id_folder = c.id_folder"
        f" AND c.name_folder = '{folder}' AND f.name_file = '{name}'"
    )
    found = cur.fetchall()
    if not found:
        cur.execute(f"INSERT INTO files.files (name_file, id_folder) VALUES ('{name}', 1)")
""",
        17,
    ),
}

#: the same INSERT (line 13) after a SELECT that does not look its row up
_UNGUARDED = {
    # a lookup of another table
    "other_table": """    cur.execute("SELECT id FROM files.folders WHERE name_folder = %s", (folder,))
    if not cur.fetchall():
""",
    # the same table by a column the INSERT does not write
    "other_key": """    cur.execute("SELECT id FROM files.files WHERE checksum = %s", (folder,))
    if not cur.fetchall():
""",
    # the insert runs when the row was found
    "found_branch": """    cur.execute("SELECT id FROM files.files WHERE name_file = %s", (name,))
    if cur.fetchall():
""",
}
_UNGUARDED_INSERT = (
    '        cur.execute("INSERT INTO files.files (name_file, folder) VALUES (%s, %s)", (name, folder))\n'
)


def _lint_helper(tmp_path: Path, body: str) -> LintReport:
    return lint_files(tmp_path, {"dags/files.py": _HELPER_HEAD + body + _HELPER_TAIL})


@pytest.mark.parametrize("shape", sorted(_GUARDED))
def test_2_an_insert_after_a_lookup_of_its_key_is_information(tmp_path: Path, shape: str) -> None:
    body, line = _GUARDED[shape]
    report = _lint_helper(tmp_path, body)
    assert [f for f in report.findings if f.rule == "IDEM002"] == []
    said = [(f.line, f.task_id) for f in report.information if f.rule == "IDEM002"]
    assert said == [(line, "record")]
    (info,) = [f for f in report.information if f.rule == "IDEM002"]
    assert "a rerun finds the row and adds none" in info.message


@pytest.mark.parametrize("shape", sorted(_UNGUARDED))
def test_2_a_select_of_another_table_or_key_is_no_guard_counter(tmp_path: Path, shape: str) -> None:
    report = _lint_helper(tmp_path, _UNGUARDED[shape] + _UNGUARDED_INSERT)
    assert _script_rows(report) == [("IDEM002", "files.py", 13, "record")]


def test_2_an_insert_select_where_not_exists_is_clean_counter(tmp_path: Path) -> None:
    """The guard in SQL: ``INSERT .. SELECT .. WHERE NOT EXISTS (SELECT 1 FROM target WHERE key ..)``."""
    body = """    cur.execute(
        "INSERT INTO files.files (name_file, folder) SELECT %s, %s "
        "WHERE NOT EXISTS (SELECT 1 FROM files.files WHERE name_file = %s)",
        (name, folder, name),
    )
"""
    assert _script_rows(_lint_helper(tmp_path, body)) == []

"""Issue 35 (lint30, docs/lint-evaluation.md "Imported callables"): a ``python_callable`` imported from
another module of the repository is the task's code, judged in the module that defines it, as an
imported ``@task`` function already was. Tested with small hand-written projects; what each test
asserts is what a reviewer reading the files would say. Following is off by default
(``--follow-imported-callables``, ``lint_paths(follow_callables=True)``): most of what it raised on
the public repositories was harmless. The tests of following, with it on, fail on main f6bfb05
(checked against main's package: the switch did not exist); the guards on installed packages would
pass there too (nothing imported was followed). The last test's two false IDEM006 (an SCP put, a
token login) were raised by following, and fail on main with the callables in the DAG file.

- rocs-org/data-pipelines' ``load_epoch_to_clickhouse`` hands ``PythonOperator`` the function
  ``extract_load_epoch_data`` of ``sync_clickhouse.py``, re-exported by its package's ``__init__``; the
  function appends the run's day of rows with ``INSERT INTO .. VALUES`` and deletes nothing (IDEM002,
  round 24's one problem, missed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_idempotent.lint import LintReport, lint_paths
from airflow_idempotent.lint.cli import main
from tests.lintfiles import explained, lint_files, per_task, seen


def _follow(root: Path, files: dict[str, str]) -> LintReport:
    """`lint_files` with ``--follow-imported-callables`` on (the change is off by default)."""
    lint_files(root, files)
    return lint_paths([root], follow_callables=True)


# a module of the repository beside the DAG file: one loader appends the day, one deletes it first
_LOADERS = """\
import clickhouse_driver


def _client():
    return clickhouse_driver.Client("clickhouse")


def extract_load_epoch_data(**kwargs):
    day = kwargs["ds"]
    rows = [(day, 1.0)]
    client = _client()
    client.execute("INSERT INTO raw_epoch (day, value) VALUES", rows)


def reload_epoch_data(**kwargs):
    day = kwargs["ds"]
    client = _client()
    client.execute("DELETE FROM raw_epoch_copy WHERE day = %(day)s", {"day": day})
    client.execute("INSERT INTO raw_epoch_copy (day, value) VALUES", [(day, 1.0)])
"""

_SIBLING_DAG = """\
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.python import PythonOperator

from sync_clickhouse import extract_load_epoch_data, reload_epoch_data

dag = DAG("load_epoch", schedule=timedelta(days=1), start_date=datetime(2021, 10, 1), catchup=False)
PythonOperator(task_id="load_epoch_vitals", python_callable=extract_load_epoch_data, dag=dag)
PythonOperator(task_id="reload_epoch_vitals", python_callable=reload_epoch_data, dag=dag)
"""


def _rows(report: LintReport, rule: str) -> list[tuple[str, int, str | None]]:
    return sorted((Path(f.file).name, f.line, f.task_id) for f in per_task(seen(report)) if f.rule == rule)


def test_a_callable_imported_from_a_sibling_module_is_read_there(tmp_path: Path) -> None:
    report = _follow(tmp_path, {"dags/dag.py": _SIBLING_DAG, "dags/sync_clickhouse.py": _LOADERS})
    # the append is at line 12 of the module that defines the callable, for the task that runs it
    assert _rows(report, "IDEM002") == [("sync_clickhouse.py", 12, "load_epoch_vitals")]
    # guard: the same insert after a delete of the day is a rerunnable load (no finding for it)
    assert not [f for f in seen(report) if f.task_id == "reload_epoch_vitals"]


def test_following_imported_callables_is_off_by_default(tmp_path: Path) -> None:
    """Most of what following adds on public repositories is harmless (the page): a switch, off."""
    files = {"dags/dag.py": _SIBLING_DAG, "dags/sync_clickhouse.py": _LOADERS}
    assert _rows(lint_files(tmp_path, files), "IDEM002") == []
    assert main([str(tmp_path)]) == 0
    assert main(["--follow-imported-callables", str(tmp_path)]) == 1  # the append, as above


_PACKAGE_DAG = """\
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.python import PythonOperator

from epoch import extract_load_epoch_data
from epoch import sync_clickhouse

dag = DAG("load_epoch", schedule=timedelta(days=1), start_date=datetime(2021, 10, 1), catchup=False)
PythonOperator(task_id="load_epoch_vitals", python_callable=extract_load_epoch_data, dag=dag)
PythonOperator(task_id="load_by_module", python_callable=sync_clickhouse.extract_load_epoch_data, dag=dag)
"""


def test_a_callable_re_exported_by_a_package_init_is_read_where_it_is_defined(tmp_path: Path) -> None:
    files = {
        "dags/dag.py": _PACKAGE_DAG,
        "dags/epoch/__init__.py": "from .sync_clickhouse import extract_load_epoch_data\n",
        "dags/epoch/sync_clickhouse.py": _LOADERS,
    }
    report = _follow(tmp_path, files)
    # rocs' shape (the package's __init__ re-exports it) and the module's attribute both reach line 12
    assert _rows(report, "IDEM002") == [
        ("sync_clickhouse.py", 12, "load_by_module"),
        ("sync_clickhouse.py", 12, "load_epoch_vitals"),
    ]


_CLOCK_MODULE = """\
from datetime import datetime

TABLE = "daily_totals"


def snapshot(**kwargs):
    import psycopg2

    conn = psycopg2.connect("dbname=dw")
    conn.cursor().execute(f"DELETE FROM {TABLE} WHERE day = %s", (datetime.now().date(),))
"""

_CLOCK_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.operators.python import BranchPythonOperator, ShortCircuitOperator

from helpers.clock import snapshot

dag = DAG("snap", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
ShortCircuitOperator(task_id="snap", python_callable=snapshot, dag=dag)
"""


def test_a_python_operator_like_callable_is_read_with_its_own_modules_names(tmp_path: Path) -> None:
    report = _follow(
        tmp_path,
        {"dags/snap.py": _CLOCK_DAG, "helpers/__init__.py": "", "helpers/clock.py": _CLOCK_MODULE},
    )
    # the clock decides which day's rows the task deletes: IDEM003 in clock.py at line 10, the
    # statement's table resolved from that module's own constant
    assert ("clock.py", 10, "snap") in _rows(report, "IDEM003")


_VENDOR = """\
import psycopg2


def append_rows(**kwargs):
    psycopg2.connect("dbname=dw").cursor().execute("INSERT INTO vendor_log (at) VALUES (now())")
"""

_VENDOR_DAG = """\
from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator

from vendorlib import append_rows
from vendorlib.jobs import run_job

dag = DAG("vendor", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)
PythonOperator(task_id="append", python_callable=append_rows, dag=dag)
PythonOperator(task_id="job", python_callable=run_job, dag=dag)
"""


def test_a_callable_of_an_installed_package_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "env" / "lib" / "python3.12" / "site-packages"
    (site / "vendorlib").mkdir(parents=True)
    (site / "vendorlib" / "__init__.py").write_text(_VENDOR)
    (site / "vendorlib" / "jobs.py").write_text("from vendorlib import append_rows as run_job\n")
    monkeypatch.syspath_prepend(str(site))
    report = _follow(tmp_path / "project", {"dags/vendor.py": _VENDOR_DAG})
    # what an installed library's function does is the library's: no finding in its files, none
    # for the tasks (the same code in the repository is an IDEM002 and an IDEM001, tested below)
    assert not [f for f in [*seen(report), *explained(report)] if "site-packages" in f.file]
    assert not [f for f in seen(report) if f.task_id in ("append", "job")]


def test_the_same_callable_in_the_repository_is_followed(tmp_path: Path) -> None:
    """The control for the guard above: the installed package's module, copied into the repository."""
    files = {
        "dags/vendor.py": _VENDOR_DAG,
        "dags/vendorlib/__init__.py": _VENDOR,
        "dags/vendorlib/jobs.py": "from vendorlib import append_rows as run_job\n",
    }
    report = _follow(tmp_path, files)
    assert _rows(report, "IDEM002") == [("__init__.py", 5, "append"), ("__init__.py", 5, "job")]


# round 11's and round 18's batches: what reading the imported callables raised that was false
_REQUESTS = """\
from datetime import datetime

import paramiko
import requests
import scp
from airflow import DAG
from airflow.operators.python import PythonOperator


def upload(**kwargs):
    session = paramiko.SSHClient()
    with scp.SCPClient(session.get_transport()) as scps:
        scps.put("/tmp/nodes.csv", "/data/nodes.csv")


def sftp_upload(**kwargs):
    sftp = paramiko.SSHClient().open_sftp()
    sftp.put("/tmp/edges.csv", "/data/edges.csv")


def fetch(token_endpoint, data_endpoint, **kwargs):
    token = requests.post(token_endpoint, params={"grant_type": "client_credentials"}).json()
    return requests.get(data_endpoint, headers={"Authorization": token["access_token"]}).json()


def notify(hook_url, **kwargs):
    requests.post(hook_url, json={"text": "loaded"})


def put_record(record_url, **kwargs):
    requests.put(record_url, json={"state": "done"})


with DAG("copies", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False,
         default_args={"retries": 2}):
    PythonOperator(task_id="upload", python_callable=upload)
    PythonOperator(task_id="sftp_upload", python_callable=sftp_upload)
    PythonOperator(task_id="fetch", python_callable=fetch)
    PythonOperator(task_id="notify", python_callable=notify)
    PythonOperator(task_id="put_record", python_callable=put_record)
"""


def test_a_file_copy_and_a_named_token_login_are_no_sends(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/copies.py": _REQUESTS})
    # an SCP/SFTP put copies a file to a path; a POST to `token_endpoint` asks for a token: no second
    # effect. Guards: a POST to a hook and a PUT of a record stay sends (the lines of their calls)
    assert _rows(report, "IDEM006") == [("copies.py", 27, "notify"), ("copies.py", 31, "put_record")]

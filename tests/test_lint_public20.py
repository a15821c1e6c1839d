"""Round 20 (issue 35, docs/lint-evaluation.md): the run's start that only names a snapshot, tested
with a small project of hand-written files; what each test asserts is what a reviewer would say:

- ``{{ dag_run.start_date }}`` handed to the repository's own operator (mapped with ``.partial()``,
  imported from its own module) whose code only labels what it uploads with it, directly or through a
  helper class it hands the value to, names a snapshot: IDEM004 as information;
- the same start used by the operator to pick what it reads (a listing's ``prefix=``, a comparison),
  or handed to code the linter cannot read (a ``python_callable``'s ``op_kwargs``, a triggered DAG's
  ``conf``), stays an IDEM004 finding (round 8's hourly counts loaded by the run's start hour).
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import lint_paths

_OPERATOR = """\
import json
import os

from airflow.models import BaseOperator
from airflow.providers.google.cloud.hooks.gcs import GCSHook


class Fetch:
    def __init__(self, url, current_time):
        self.url = url
        self.current_time = current_time

    def extract(self):
        return {"url": self.url, "ts": self.current_time}


class SnapshotOperator(BaseOperator):
    template_fields = ("ts", "destination_path", "prefix")

    def __init__(self, url, ts, destination_path, prefix="", **kwargs):
        super().__init__(**kwargs)
        self.url = url
        self.ts = ts
        self.destination_path = destination_path
        self.prefix = prefix

    def execute(self, context):
        hook = GCSHook()
        known = hook.list(bucket_name="raw", prefix=self.prefix)
        extract = Fetch(url=self.url, current_time=self.ts).extract()
        name = os.path.join(self.destination_path, "feed.zip")
        {use}
        hook.upload(bucket_name="raw", object_name=name, data=b"", metadata={"m": json.dumps(extract)})
        return {"path": name, "ts": self.ts, "known": len(known)}
"""

_DAG = """\
from datetime import datetime

from airflow.sdk import DAG

from operators.snapshot import SnapshotOperator

with DAG(dag_id="snapshots", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False):
    SnapshotOperator.partial(
        task_id="download",
        ts="{{{{ dag_run.start_date | ts }}}}",
        destination_path="feeds/ts={{{{ dag_run.start_date | ts }}}}",
        prefix="{prefix}",
    ).expand(url=["/a.zip", "/b.zip"])
"""


def _lint(tmp_path: Path, use: str = "pass", prefix: str = "feeds/") -> tuple[list[int], list[str]]:
    (tmp_path / "operators").mkdir()
    (tmp_path / "operators" / "__init__.py").write_text("")
    (tmp_path / "operators" / "snapshot.py").write_text(_OPERATOR.replace("{use}", use))
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "snapshots.py").write_text(_DAG.format(prefix=prefix))
    report = lint_paths([tmp_path])
    failing = [f.line for f in report.findings if f.rule == "IDEM004"]
    info = [i.message for i in report.information if i.rule == "IDEM004"]
    return failing, info


def test_the_run_start_naming_what_an_own_operator_writes_is_information(tmp_path: Path) -> None:
    failing, info = _lint(tmp_path)
    assert failing == []
    assert len(info) == 2, info  # ts= and destination_path=, each at its own line
    assert all("SnapshotOperator's code only labels what it writes" in m for m in info), info
    assert all("reads no other span" in m for m in info), info


def test_the_run_start_selecting_a_listing_stays_a_finding(tmp_path: Path) -> None:
    failing, info = _lint(tmp_path, prefix="feeds/ts={{ dag_run.start_date | ts }}")
    assert failing == [12] and len(info) == 2, (failing, info)  # prefix= reads by it; the others label


def test_the_run_start_compared_in_the_code_stays_a_finding(tmp_path: Path) -> None:
    use = 'if self.ts < "2026-06-01":\n            return None'
    failing, info = _lint(tmp_path, use=use)
    assert failing == [10] and len(info) == 1, (failing, info)  # ts= decides; destination_path= labels


def _opaque(tmp_path: Path, task: str) -> list[int]:
    path = tmp_path / "d.py"
    path.write_text(
        "from datetime import datetime\n"
        "from airflow.sdk import DAG\n"
        "from airflow.providers.standard.operators.python import PythonOperator\n"
        "from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator\n"
        "from loaders import load_hour\n"
        "with DAG(dag_id='counts', schedule='@hourly', start_date=datetime(2026, 1, 1), catchup=False):\n"
        f"    {task}\n"
    )
    report = lint_paths([path])
    assert not [i for i in report.information if i.rule == "IDEM004"]
    return [f.line for f in report.findings if f.rule == "IDEM004"]


def test_code_the_linter_cannot_read_keeps_the_finding(tmp_path: Path) -> None:
    """Round 8's ``cold-storage-scan``: the run's start hour keys the partition a callable loads into
    Vertica, and the partition a triggered DAG reads: both useful findings, both kept."""
    hour = "{{ dag_run.start_date.strftime('%Y-%m-%dT%H') }}"
    callable_task = (
        f"PythonOperator(task_id='load', python_callable=load_hour, op_kwargs={{'hour': \"{hour}\"}})"
    )
    assert _opaque(tmp_path, callable_task) == [7]
    trigger = f"TriggerDagRunOperator(task_id='next', trigger_dag_id='user', conf={{'hour': \"{hour}\"}})"
    assert _opaque(tmp_path, trigger) == [7]

"""Round 36g of issue 35 (lint65, docs/lint-evaluation.md): one finding per code site.

A helper module's INSERT that three DAGs' tasks call, and a DAG factory's ``sql=`` line that each DAG
of its loop runs, are each ONE finding of the report, listing every (DAG, task) that reaches the
line in the order found; an acknowledgement at one task's anchor covers that task only, so a site is
one failing finding for the tasks left and one acknowledged finding for the task acknowledged. The
per-task answers (`TaskReport.rules`) still name the rule for every task. A task that reaches one line
for two causes (two tables in one ``sql=``) is one site listing the task once, its two per-task
findings kept, each with its message, as the site's ``members``.

Lines and tasks below are counted by hand in the files written here. On main 8e2ccbc (one finding per
task) 10 of these 11 tests fail; the one that passes there is the per-task answers test, which pins
what must not change.
"""

from __future__ import annotations

import json
from pathlib import Path

from airflow_idempotent.lint import LintReport
from airflow_idempotent.lint.sarif import to_sarif
from tests.lintfiles import lint_files

_HELPER = (
    "from airflow.providers.postgres.hooks.postgres import PostgresHook\n"  # 1
    "\n"
    "\n"  # 3
    "def append_events(rows):\n"
    '    hook = PostgresHook(postgres_conn_id="warehouse")\n'  # 5
    '    hook.run("INSERT INTO events (id, payload) VALUES (%s, %s)", parameters=rows)\n'  # 6: the site
)
_HELPER_LINE = 6


def _caller(dag_id: str, ack: str = "") -> str:
    """A DAG file whose one task calls the helper; `ack`: a comment on the line above the task's call
    (line 12, the task's anchor)."""
    return (
        "from datetime import datetime\n"  # 1
        "\n"
        "from airflow.sdk import DAG, task\n"  # 3
        "from helpers.db import append_events\n"
        "\n"  # 5
        f'with DAG("{dag_id}", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):\n'
        "\n"  # 7
        "    @task\n"
        "    def load():\n"  # 9
        '        append_events([(1, "x")])\n'
        "\n" + (f"    {ack}\n" if ack else "") + "    load()\n"  # 11
    )


def _helper_project(acks: dict[str, str] | None = None) -> dict[str, str]:
    acks = acks or {}
    files = {"dags/helpers/__init__.py": "", "dags/helpers/db.py": _HELPER}
    for name in ("dag_a", "dag_b", "dag_c"):
        files[f"dags/{name}.py"] = _caller(name, acks.get(name, ""))
    return files


_FACTORY = (
    "from datetime import datetime\n"  # 1
    "\n"
    "from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator\n"  # 3
    "from airflow.sdk import DAG\n"
    "\n"  # 5
    'for name in ["orders", "refunds", "payouts"]:\n'
    '    with DAG(f"copy_{name}", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):\n'
    "        SQLExecuteQueryOperator(\n"  # 8
    '            task_id="append",\n'
    '            conn_id="warehouse",\n'  # 10
    '            sql=f"INSERT INTO copy_{name} SELECT * FROM staging_{name}",\n'  # 11: the site
    "        )\n"
)
_FACTORY_LINE = 11


def _sites(
    findings: list, rule: str = "IDEM002"
) -> list[tuple[str, int, list[tuple[str | None, str | None]]]]:
    return [(Path(f.file).name, f.line, list(f.tasks)) for f in findings if f.rule == rule]


_ABC = [("dag_a", "load"), ("dag_b", "load"), ("dag_c", "load")]


def test_a_helper_insert_three_dags_call_is_one_finding_listing_the_three_tasks(tmp_path: Path) -> None:
    report = lint_files(tmp_path, _helper_project())
    assert _sites(report.findings) == [("db.py", _HELPER_LINE, _ABC)]
    (site,) = report.failing
    assert (site.dag_id, site.task_id) == ("dag_a", "load")  # the first task found stays its owner
    assert report.exit_code == 1 and report.acknowledged == []


def test_a_dag_factory_line_is_one_finding_listing_each_dag_of_the_loop(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/factory.py": _FACTORY})
    tasks = [("copy_orders", "append"), ("copy_refunds", "append"), ("copy_payouts", "append")]
    assert _sites(report.findings) == [("factory.py", _FACTORY_LINE, tasks)]
    # three messages (one table each), one finding: the first task's message is the one shown
    (site,) = report.findings
    assert "copy_orders" in site.message and "copy_refunds" not in site.message


def test_an_ack_at_one_tasks_anchor_leaves_the_other_tasks_failing(tmp_path: Path) -> None:
    ack = "# idempotent: ack IDEM002 dag_b replays into a scratch copy"
    report = lint_files(tmp_path, _helper_project({"dag_b": ack}))
    assert _sites(report.failing) == [("db.py", _HELPER_LINE, [("dag_a", "load"), ("dag_c", "load")])]
    assert _sites(report.acknowledged) == [("db.py", _HELPER_LINE, [("dag_b", "load")])]
    assert report.acknowledged[0].reason == "dag_b replays into a scratch copy"
    assert report.exit_code == 1


def test_an_ack_at_every_tasks_anchor_is_one_acknowledged_site(tmp_path: Path) -> None:
    ack = "# idempotent: ack IDEM002 an audit log"
    report = lint_files(tmp_path, _helper_project({name: ack for name in ("dag_a", "dag_b", "dag_c")}))
    assert report.failing == [] and report.exit_code == 0
    assert _sites(report.acknowledged) == [("db.py", _HELPER_LINE, _ABC)]


def test_the_per_task_answers_still_name_the_rule_for_every_task(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {**_helper_project(), "dags/factory.py": _FACTORY})
    assert sorted((t.dag_id, t.task_id) for t in report.tasks if "IDEM002" in t.rules) == sorted(
        [*_ABC, ("copy_orders", "append"), ("copy_payouts", "append"), ("copy_refunds", "append")]
    )


def test_text_names_a_site_once_with_its_tasks(tmp_path: Path) -> None:
    text = lint_files(tmp_path, {**_helper_project(), "dags/factory.py": _FACTORY}).to_text()
    lines = [line for line in text.splitlines() if "IDEM002 append-insert" in line]
    assert len(lines) == 2
    assert "[copy_orders.append +2 more tasks: copy_refunds.append, copy_payouts.append]" in lines[0]
    assert (
        f"db.py:{_HELPER_LINE}: " in lines[1]
        and "[dag_a.load +2 more tasks: dag_b.load, dag_c.load]" in lines[1]
    )
    assert "2 finding(s) (IDEM002 x2) reached by 6 task(s), 0 acknowledged" in text


def test_text_names_at_most_five_more_tasks(tmp_path: Path) -> None:
    files: dict[str, str] = {"dags/helpers/__init__.py": "", "dags/helpers/db.py": _HELPER}
    names = [f"dag_{i}" for i in range(8)]  # 8 callers: the first, 5 more named, "..."
    files.update({f"dags/{name}.py": _caller(name) for name in names})
    text = lint_files(tmp_path, files).to_text()
    (line,) = [line for line in text.splitlines() if "IDEM002 append-insert" in line]
    named = ", ".join(f"{name}.load" for name in names[1:6])
    assert f"[dag_0.load +7 more tasks: {named}, ...]" in line


def test_json_lists_the_tasks_beside_the_first_and_counts_sites(tmp_path: Path) -> None:
    ack = "# idempotent: ack IDEM002 dag_b replays into a scratch copy"
    doc = json.loads(lint_files(tmp_path, _helper_project({"dag_b": ack})).to_json())
    assert (doc["summary"]["findings"], doc["summary"]["acknowledged"]) == (1, 1)
    assert doc["summary"]["task_findings"] == 2 and doc["summary"]["by_rule"] == {"IDEM002": 1}
    (finding,) = doc["findings"]
    assert (finding["dag_id"], finding["task_id"]) == ("dag_a", "load")
    assert finding["tasks"] == [
        {"dag_id": "dag_a", "task_id": "load"},
        {"dag_id": "dag_c", "task_id": "load"},
    ]
    assert doc["acknowledged"][0]["tasks"] == [{"dag_id": "dag_b", "task_id": "load"}]


def _results(report: LintReport) -> list[dict]:
    (run,) = to_sarif(report)["runs"]
    return run["results"]


def test_sarif_has_one_result_per_site_with_its_tasks(tmp_path: Path) -> None:
    ack = "# idempotent: ack IDEM002 dag_b replays into a scratch copy"
    results = _results(lint_files(tmp_path, {**_helper_project({"dag_b": ack}), "dags/factory.py": _FACTORY}))
    assert len(results) == 3  # the factory's line; the helper's line failing and acknowledged
    by_tasks = {tuple(r["properties"]["tasks"]): r for r in results}
    assert set(by_tasks) == {
        ("copy_orders.append", "copy_refunds.append", "copy_payouts.append"),
        ("dag_a.load", "dag_c.load"),
        ("dag_b.load",),
    }
    failing = by_tasks[("dag_a.load", "dag_c.load")]
    assert (
        "suppressions" not in failing and by_tasks[("dag_b.load",)]["suppressions"][0]["kind"] == "inSource"
    )
    assert [loc["fullyQualifiedName"] for loc in failing["locations"][0]["logicalLocations"]] == [
        "dag_a.load",
        "dag_c.load",
    ]
    assert failing["locations"][0]["physicalLocation"]["region"]["startLine"] == _HELPER_LINE
    fingerprints = [r["partialFingerprints"]["idempotentSite/v2"] for r in results]
    assert len(set(fingerprints)) == 3  # the helper's two results differ by their place in the file


def test_a_sites_fingerprint_stays_when_another_dag_calls_the_helper(tmp_path: Path) -> None:
    first = _results(lint_files(tmp_path, _helper_project()))
    second = _results(
        lint_files(tmp_path, {"dags/dag_0.py": _caller("dag_0")})
    )  # sorts first: a new first task
    assert len(first) == len(second) == 1
    assert second[0]["properties"]["tasks"][0] == "dag_0.load"
    assert first[0]["partialFingerprints"] == second[0]["partialFingerprints"]


_TWO_TABLES = (
    "from datetime import datetime\n"  # 1
    "\n"
    "from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator\n"  # 3
    "from airflow.sdk import DAG\n"
    "\n"  # 5
    'with DAG("copies", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):\n'
    "    SQLExecuteQueryOperator(\n"  # 7
    '        task_id="copy",\n'
    '        conn_id="warehouse",\n'  # 9
    '        sql="INSERT INTO copy_a SELECT * FROM staging_a; INSERT INTO copy_b SELECT * FROM staging_b",\n'
    "    )\n"  # 11
)


def test_a_task_reaching_a_line_for_two_causes_is_one_site_with_both_members(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/copies.py": _TWO_TABLES})
    # two tables appended at line 10 by one task: two causes (per task), one site listing the task once
    assert _sites(report.findings) == [("copies.py", 10, [("copies", "copy")])]
    (site,) = report.findings
    assert [m.message.split(" appends")[0] for m in site.members] == [
        "INSERT INTO copy_a",
        "INSERT INTO copy_b",
    ]
    assert all((m.dag_id, m.task_id, m.line) == ("copies", "copy", 10) for m in site.members)

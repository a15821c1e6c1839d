"""The linter's round-5 change (issue 35, docs/lint-evaluation.md): severity by a stated principle,
not by repository. Two writers of one table are a defect (IDEM007) only when one of them replaces
rows (overwrite, truncate, replace, any delete) or both only add rows or amounts without a key
(append, accumulate); every other pair is information. Each test is a few hand-written lines and the
findings counted by hand here (not from the linter's tables)."""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths
from tests.lintfiles import explained, seen

_HEAD = """from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
"""


def _dag(*tasks: tuple[str, str]) -> str:
    lines = ["", "with DAG('d', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):"]
    for task_id, sql in tasks:
        lines.append(f"    SQLExecuteQueryOperator(task_id={task_id!r}, conn_id='wh', sql={sql!r})")
    return "\n".join(lines) + "\n"


def _lint(tmp_path: Path, *tasks: tuple[str, str]) -> LintReport:
    (tmp_path / "dag_39.py").write_text(_HEAD + _dag(*tasks))
    return lint_paths([tmp_path])


def _shared(report: LintReport) -> tuple[list[str], list[str]]:
    """(tasks with an IDEM007 finding, tasks with IDEM007 information), sorted."""
    found = sorted(str(f.task_id) for f in seen(report) if f.rule == "IDEM007")
    informed = sorted(str(f.task_id) for f in explained(report) if f.rule == "IDEM007")
    return found, informed


_APPEND = "INSERT INTO jobs.details (run_id, note_id, status) SELECT 7, id, 'new' FROM notes"
_MARK = "UPDATE jobs.details SET status = 'done' WHERE run_id = 7 AND note_id IN (SELECT id FROM done)"
_FLAG = "UPDATE jobs.details SET status = 'error' WHERE run_id = 7 AND note_id IN (SELECT id FROM failed)"


def test_an_append_and_updates_of_its_rows_are_information(tmp_path: Path) -> None:
    """A status queue (FredHutch, ilri): one task inserts a run's rows, two later tasks only update
    their status. No writer replaces rows and only one adds them: no IDEM007, three information."""
    report = _lint(tmp_path, ("populate", _APPEND), ("annotate", _MARK), ("fail", _FLAG))
    assert _shared(report) == ([], ["annotate", "fail", "populate"])


def test_two_keyless_appends_are_each_their_own_defect(tmp_path: Path) -> None:
    """Two tasks both append to one table without a key: each rerun adds its own rows again, which
    is each task's IDEM002, but neither touches the other's rows, so since round 8 the pair is
    information (tests/test_lint_public8.py; round 5 raised it as IDEM007 on both)."""
    other = "INSERT INTO jobs.details (run_id, note_id, status) SELECT 7, id, 'new' FROM more_notes"
    report = _lint(tmp_path, ("web", _APPEND), ("mobile", other))
    assert _shared(report) == ([], ["mobile", "web"])
    assert sorted(str(f.task_id) for f in seen(report) if f.rule == "IDEM002") == ["mobile", "web"]


def test_two_accumulating_updates_stay_a_finding(tmp_path: Path) -> None:
    """Two tasks both add to one counter (tenminschool's quiz and video DAGs): each rerun adds again."""
    quiz = "UPDATE reports.learning SET total = total + 3 WHERE day = '2024-01-01'"
    video = "UPDATE reports.learning SET total = total + 5 WHERE day = '2024-01-01'"
    report = _lint(tmp_path, ("quiz", quiz), ("video", video))
    assert _shared(report)[0] == ["quiz", "video"]


def test_an_overwrite_and_a_merge_stay_a_finding(tmp_path: Path) -> None:
    """One task overwrites the table, another merges late rows into it (the corpus's tw06): the
    overwrite's rerun drops the merged rows. A writer that replaces rows keeps the pair a defect."""
    rewrite = "INSERT OVERWRITE TABLE mart.sales SELECT * FROM staging.sales"
    merge = (
        "MERGE INTO mart.sales t USING late s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET amount = s.amount WHEN NOT MATCHED THEN INSERT (id, amount) "
        "VALUES (s.id, s.amount)"
    )
    report = _lint(tmp_path, ("rewrite", rewrite), ("merge", merge))
    assert _shared(report)[0] == ["merge", "rewrite"]


def test_a_window_delete_beside_updates_stays_a_finding(tmp_path: Path) -> None:
    """Any delete replaces rows another task may have written: a task that deletes a day and inserts
    it again, beside a task that updates rows of that table, stays IDEM007 for both."""
    reload = "DELETE FROM mart.orders WHERE day = '{{ ds }}'; INSERT INTO mart.orders SELECT * FROM src"
    report = _lint(tmp_path, ("reload", reload), ("mark", "UPDATE mart.orders SET late = true WHERE id < 9"))
    assert _shared(report)[0] == ["mark", "reload"]


_CATCHUP = """
from datetime import datetime, time, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

{start}
dag = DAG('scan', schedule_interval='@daily', default_args={{'start_date': start}})
BashOperator(task_id='scan', bash_command='ls /data/incoming', dag=dag)
"""


def _catchup(tmp_path: Path, start: str) -> LintReport:
    (tmp_path / "scan_39.py").write_text(_CATCHUP.format(start=start))
    return lint_paths([tmp_path])


def test_catchup_from_a_start_that_moves_with_the_clock_is_information(tmp_path: Path) -> None:
    """LREN-CHUV's scanners (Airflow 2: catchup on by default): start_date is the current hour, so
    catchup has nothing before it to create; IDEM005 is information, the moving start stays IDEM003."""
    start = "start = datetime.utcnow()\nstart = datetime.combine(start.date(), time(start.hour, 0))"
    report = _catchup(tmp_path, start)
    assert [f.rule for f in seen(report) if f.rule == "IDEM005"] == []
    assert [f.rule for f in explained(report) if f.rule == "IDEM005"] == ["IDEM005"]
    assert "IDEM003" in {f.rule for f in seen(report)}


def test_catchup_from_a_fixed_start_stays_a_finding(tmp_path: Path) -> None:
    """The same DAG from a fixed date: every day since then is queued at once, a growing backlog."""
    report = _catchup(tmp_path, "start = datetime(2021, 1, 1)")
    assert [f.rule for f in seen(report)] == ["IDEM005"]
    assert [f for f in explained(report) if f.rule == "IDEM005"] == []


_FACTORY = """from datetime import datetime

from airflow import DAG
from airflow.operators.bash import BashOperator


def notify_dag():
    dag = DAG('notify', schedule_interval={schedule}, default_args={{'start_date': datetime.now()}})
    BashOperator(task_id='post', bash_command='echo done', dag=dag)
    return dag
"""


def _factory(tmp_path: Path, schedule: str) -> LintReport:
    (tmp_path / "factories.py").write_text(_FACTORY.format(schedule=schedule))
    (tmp_path / "init_39.py").write_text(
        "from airflow.models import DagBag\n\nfrom factories import notify_dag\n\n\n"
        "def register_dag(dag):\n    DagBag().bag_dag(dag)\n    return dag.dag_id\n\n\n"
        "register_dag(notify_dag())\n"
    )
    return lint_paths([tmp_path])


def test_a_factory_of_triggered_dags_with_a_clock_start_is_information(tmp_path: Path) -> None:
    """LREN-CHUV's factories: the DAG a factory builds has schedule None and start_date now(); at the
    factory's call the clock is that start, which creates no windows: information, no IDEM003."""
    report = _factory(tmp_path, "None")
    assert [f for f in seen(report) if f.rule == "IDEM003"] == []
    called = [f for f in explained(report) if f.rule == "IDEM003" and f.file.endswith("init_39.py")]
    assert [f.line for f in called] == [11]


def test_a_factory_of_a_daily_dag_with_a_clock_start_stays_a_finding(tmp_path: Path) -> None:
    """The same factory building an @daily DAG: its first window moves with each parse, IDEM003."""
    report = _factory(tmp_path, "'@daily'")
    assert [(f.rule, f.line) for f in seen(report) if f.file.endswith("init_39.py")] == [("IDEM003", 11)]

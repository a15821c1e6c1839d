"""Round 36e (issue 35, lint60): IDEM003's randomness is a defect only where the random value becomes
part of a name of something written (docs/lint-evaluation.md). Every useful randomness label of the
labelled rounds (77, held out) is a uuid built into an object's key under the run's partition (a rerun
adds a second file beside the first); the harmless ones use the value whole: a procedure's session
id, a sampled or chosen item, row ids. Each defect shape is tested next to its
harmless counterpart, in a few hand-written lines; the expected rule, line and severity are what a
reviewer would say of the snippet, decided by hand, not read from the linter.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths

_HEAD = """import random
import uuid

import pendulum
from airflow.sdk import DAG, task

with DAG("pipeline", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
"""


def _lint(tmp_path: Path, body: str) -> LintReport:
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "pipeline.py").write_text(_HEAD + body)
    return lint_paths([tmp_path])


def _rows(items: list, rule: str = "IDEM003") -> set[tuple[str | None, int]]:  # type: ignore[type-arg]
    return {(f.task_id, f.line) for f in items if f.rule == rule}


_FIRST = len(_HEAD.splitlines())  # the line before the body's first line


def test_a_random_id_used_whole_is_information(tmp_path: Path) -> None:
    """A procedure's session id and an id column of rows: a rerun draws other ids for the same work."""
    report = _lint(
        tmp_path,
        """
    @task
    def call_procedure(hook=None):
        session_id = uuid.uuid4()
        hook.run("CALL categorise(%s)", parameters=(session_id,))

    @task
    def score(frame=None):
        frame["id"] = [uuid.uuid4() for _ in range(len(frame))]
        frame.to_sql("scores", con=None, if_exists="replace")

    call_procedure() >> score()
""",
    )
    assert _rows(report.information) >= {("call_procedure", _FIRST + 4), ("score", _FIRST + 9)}
    assert not _rows(report.findings)
    said = [f for f in report.information if f.rule == "IDEM003" and f.task_id == "call_procedure"]
    assert "used whole" in said[0].message and "would be one if the value were built" in said[0].message


def test_a_random_choice_or_sample_is_information_a_random_number_is_not(tmp_path: Path) -> None:
    """A pick among given items (a partner to spot-check) names nothing; a random number may be the
    data itself (Airflow's state-store examples simulate a job's row count with ``randint``)."""
    report = _lint(
        tmp_path,
        """
    @task
    def spot_check(hook=None, partners=None):
        partner = random.choice(partners)
        sample = random.sample(partners, 10)
        hook.run("CALL check_partners(%s, %s)", parameters=(partner, sample))

    @task
    def simulate(hook=None):
        rows = [{"id": i} for i in range(random.randint(100, 500))]
        hook.insert_rows("orders", rows)

    spot_check() >> simulate()
""",
    )
    assert _rows(report.information) == {("spot_check", _FIRST + 4), ("spot_check", _FIRST + 5)}
    assert _rows(report.findings) == {("simulate", _FIRST + 10)}


def test_a_random_object_name_under_the_runs_partition_stays_a_defect(tmp_path: Path) -> None:
    """The useful shape: a rerun adds a second file under the partition, the table over it doubles."""
    report = _lint(
        tmp_path,
        """
    @task
    def upload(hook=None, ds=None):
        hook.upload(bucket="raw", object_name=f"/snapshot_date={ds}/{uuid.uuid4()}", data=b"")

    @task
    def spill(bucket=None, ds=None):
        blob = bucket.blob(f"snapshot_date={ds}/" + str(uuid.uuid4()))
        blob.upload_from_string("")

    upload() >> spill()
""",
    )
    assert _rows(report.findings) >= {("upload", _FIRST + 4), ("spill", _FIRST + 8)}
    assert not _rows(report.information)


def test_a_random_value_given_as_a_key_or_returned_stays_a_defect(tmp_path: Path) -> None:
    """Given whole as an object's key (by keyword, or to a call that writes), or returned (a later task
    may name a file by it): the linter cannot show it names nothing, so the finding stands."""
    report = _lint(
        tmp_path,
        """
    @task
    def put(hook=None):
        hook.load_bytes(b"", key=str(uuid.uuid4()), bucket_name="raw")

    @task
    def make_id():
        return uuid.uuid4().hex

    @task
    def put_positional(client=None):
        client.put_object("raw", str(uuid.uuid4()), b"")

    put() >> make_id() >> put_positional()
""",
    )
    assert _rows(report.findings) == {
        ("put", _FIRST + 4),
        ("make_id", _FIRST + 8),
        ("put_positional", _FIRST + 12),
    }
    assert not _rows(report.information)


def test_the_clock_is_not_judged_as_randomness(tmp_path: Path) -> None:
    """Guard: a plain clock read used whole as an argument keeps its IDEM003 (round 36e changes only
    randomness)."""
    report = _lint(
        tmp_path,
        """
    @task
    def call_procedure(hook=None):
        day = pendulum.now()
        hook.run("CALL load_day(%s)", parameters=(day,))

    call_procedure()
""",
    )
    assert _rows(report.findings) == {("call_procedure", _FIRST + 4)}

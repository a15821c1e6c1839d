"""The linter's round-10 changes (issue 35, docs/lint-evaluation.md): each a principle stated once in
the module that owns it, tested here with a few hand-written lines. What each test asserts is what a
reviewer would say of the snippet, counted by hand (never read from the linter's tables):

- pandas-gbq's ``to_gbq`` writes like ``to_sql``: ``if_exists='append'`` adds the frame's rows again
  on every retry or rerun; ``'replace'`` and the default ``'fail'`` do not (codechecks);
- a clock value read only in the test of an ``assert``, or of an ``if`` whose body only raises, only
  decides whether the task fails (a freshness or health check): no window (syntax.asserts_only);
- the body of ``if __name__ == "__main__":`` never runs when Airflow parses the file: a task function
  called from there is not module-level code (syntax.main_guard).
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths


def _lint(tmp_path: Path, files: dict[str, str]) -> LintReport:
    (tmp_path / "dags").mkdir(parents=True)
    _ = [(tmp_path / "dags" / name).write_text(text) for name, text in files.items()]
    return lint_paths([tmp_path])


def _found(report: LintReport, rule: str) -> list[tuple[str, int, str | None]]:
    return sorted((Path(f.file).name, f.line, f.task_id) for f in report.findings if f.rule == rule)


_HEAD = """from datetime import datetime, timedelta, timezone
import pandas as pd
import pandas_gbq
from airflow.decorators import dag, task


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 2})
def loads():
"""

_GBQ = (
    _HEAD
    + """    @task
    def append_df(ds=None):
        pd.DataFrame({"day": [ds]}).to_gbq("stats.daily", project_id="p", if_exists="append")

    @task
    def append_module(ds=None):
        pandas_gbq.to_gbq(pd.DataFrame({"day": [ds]}), "stats.other", project_id="p", if_exists="append")

    @task
    def replace_df(ds=None):
        pd.DataFrame({"day": [ds]}).to_gbq(destination_table="stats.snap", if_exists="replace")

    @task
    def create_df(ds=None):
        pd.DataFrame({"day": [ds]}).to_gbq("stats.once", project_id="p")

    append_df() >> append_module() >> replace_df() >> create_df()


loads()
"""
)


def test_to_gbq_append_is_an_append_and_replace_or_fail_is_not(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"gbq.py": _GBQ})
    # two appending tasks (lines 11 and 15), by hand; replace and the default 'fail' are no append
    assert _found(report, "IDEM002") == [("gbq.py", 11, "append_df"), ("gbq.py", 15, "append_module")]


_CHECKS = (
    _HEAD
    + """    @task
    def fresh():
        last = datetime.fromisoformat(read_last())
        if datetime.now(timezone.utc) - last > timedelta(hours=1):
            raise ValueError("stale")

    @task
    def asserted():
        assert read_last() > datetime.now(timezone.utc) - timedelta(days=1)

    @task
    def windowed():
        since = datetime.now(timezone.utc) - timedelta(days=1)
        if since.weekday() == 0:
            raise ValueError("monday")
        load(since)

    fresh() >> asserted() >> windowed()


loads()
"""
)


def test_a_clock_read_that_only_fails_the_task_is_no_window(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"checks.py": _CHECKS})
    # by hand: fresh and asserted only raise; windowed loads from a clock-relative `since` (line 21)
    assert _found(report, "IDEM004") == [("checks.py", 21, "windowed")]
    assert _found(report, "IDEM003") == []


_MAIN = """from datetime import datetime, timedelta
from airflow.decorators import dag, task


def export(since=None):
    since = since or datetime.now() - timedelta(days=1)
    write_rows(since)


@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def manual():
    @task
    def run(ds=None):
        export(datetime.fromisoformat(ds))

    run()


manual()

if __name__ == "__main__":
    export()
"""


def test_code_under_a_main_guard_is_not_module_level_code(tmp_path: Path) -> None:
    guarded = _lint(tmp_path / "a", {"main.py": _MAIN})
    # by hand: Airflow never runs the guarded call; the task passes its own date
    assert [f for f in guarded.findings if f.task_id is None] == []
    unguarded = _lint(tmp_path / "b", {"main.py": _MAIN.replace('if __name__ == "__main__":\n    ', "")})
    # the same call at module level runs at every parse: a relative window read in module-level code
    assert [(f.rule, f.line, f.task_id) for f in unguarded.findings if f.task_id is None] == [
        ("IDEM004", 6, None)
    ]

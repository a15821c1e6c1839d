"""The DAG linter: every corpus file's findings as its header states them, the CLI, the three answers.

Each file of tests/lint_corpus/ starts with

    # Lint corpus: <what it is>
    # expect: IDEM002@22 IDEM001@sql/c18_daily_margin.sql:6     (or: none)
    # expect-ack: IDEM002@22                                      (or: none)

and the linter must report exactly those unacknowledged and acknowledged findings (rule and line).
The files in tests/lint_corpus/shared_target/ only hold their expectations when linted together.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_idempotent.lint import RULES, LintReport, lint_paths, sql_writes
from airflow_idempotent.lint.cli import main, register
from airflow_idempotent.lint.schedule import cron_period
from tests.lintfiles import explained, seen

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "lint_corpus"
TOP_LEVEL = sorted(CORPUS.glob("*.py"))
SHARED = CORPUS / "shared_target"

Expected = set[tuple[str, Path, int]]


def expectations(path: Path) -> tuple[Expected, Expected]:
    """(unacknowledged, acknowledged) findings stated in a corpus file's header."""
    header = path.read_text().splitlines()[:4]
    out: dict[str, Expected] = {}
    for key in ("expect", "expect-ack"):
        line = next(h for h in header if h.startswith(f"# {key}:"))
        found: Expected = set()
        for item in line.split(":", 1)[1].split():
            if item == "none":
                continue
            rule, where = item.split("@")
            file, _, number = where.rpartition(":")
            found.add((rule, (path.parent / file).resolve() if file else path.resolve(), int(number)))
        out[key] = found
    return out["expect"], out["expect-ack"]


def got(report: LintReport) -> tuple[Expected, Expected]:
    def places(findings: list) -> Expected:
        return {(f.rule, Path(f.file).resolve(), f.line) for f in findings}

    return places(report.failing), places(report.acknowledged)


def test_corpus_is_large_and_covers_every_rule() -> None:
    every = [*TOP_LEVEL, *SHARED.glob("*.py")]
    assert len(every) >= 25
    rules = {rule for path in every for part in expectations(path) for rule, _, _ in part}
    assert rules >= set(RULES) - {"IDEM000"}  # IDEM000 (a syntax error) is tested with a temporary file
    clean = [p for p in every if expectations(p) == (set(), set())]
    assert len(clean) >= 8, "the corpus needs idempotent DAGs too, to show the linter stays quiet"


@pytest.mark.parametrize("path", TOP_LEVEL, ids=[p.stem for p in TOP_LEVEL])
def test_corpus_file_findings_match_its_header(path: Path) -> None:
    report = lint_paths([path])
    assert got(report) == expectations(path), report.to_text()


def test_shared_target_is_found_across_files() -> None:
    report = lint_paths([SHARED])
    want: tuple[Expected, Expected] = (set(), set())
    for path in sorted(SHARED.glob("*.py")):
        failing, acked = expectations(path)
        want[0].update(failing)
        want[1].update(acked)
    assert got(report) == want, report.to_text()
    for path in SHARED.glob("*.py"):  # alone, each writer is fine
        assert lint_paths([path]).findings == []


def test_whole_corpus_at_once_is_the_union_of_its_files() -> None:
    report = lint_paths([CORPUS])
    want: tuple[Expected, Expected] = (set(), set())
    for path in [*TOP_LEVEL, *SHARED.glob("*.py")]:
        failing, acked = expectations(path)
        want[0].update(failing)
        want[1].update(acked)
    assert got(report) == want
    assert len(report.files) == len(TOP_LEVEL) + len(list(SHARED.glob("*.py")))


# --- the three review questions --------------------------------------------------------------------


def task(report: LintReport, task_id: str):  # type: ignore[no-untyped-def]
    (found,) = [t for t in report.tasks if t.task_id == task_id]
    return found


@pytest.mark.parametrize(
    "name, task_id, runs_twice, window, backfill",
    [
        (
            "c02_merge_operator",
            "merge_payouts",
            "Nothing: it merges on (sale_id) into c02_payouts",
            "The run's logical date plus granularity=day (MergeOperator).",
            "`airflow backfill create --dag-id c02_payouts_merge --from-date <90 days ago> --to-date "
            "<yesterday> --reprocess-behavior completed`: each window rewrites only itself.",
        ),
        (
            "c01_overwrite_operator",
            "write_revenue",
            "Nothing: it deletes and rewrites its window of c01_daily_revenue",
            "The run's logical date plus granularity=day (PartitionOverwriteOperator).",
            "`airflow backfill create --dag-id c01_revenue_overwrite",
        ),
        (
            "c03_naive_append",
            "append_payouts",
            "Appends again: INSERT INTO c03_payouts_naive with no window delete or key.",
            "The run's logical date: {{ ds }} in its SQL.",
            "Not safely: every window that already ran is appended again",
        ),
        (
            "c04_delete_then_insert",
            "rewrite_day",
            "Nothing: it deletes its window of c04_orders_daily, then inserts it, in one task.",
            "The run's logical date: {{ ds }} in its SQL.",
            "`airflow backfill create --dag-id c04_orders_daily",
        ),
        (
            "c05_upsert_on_conflict",
            "upsert_customers",
            "Nothing: it upserts into c05_customers on its key (INSERT INTO c05_customers .. ON CONFLICT "
            "(customer_id))",
            "The run's data interval: {{ data_interval_start }} in its SQL.",
            "`airflow backfill create",
        ),
        (
            "c06_clock_sql",
            "snapshot_stock",
            "Nothing: it deletes its window of c06_stock_snapshot, then inserts it, in one task. But what "
            "it reads depends on when it runs",
            "The clock: CURRENT_DATE in its SQL.",
            "Not at all: its window comes from the clock",
        ),
        (
            "c07_relative_window_sql",
            "count_events",
            "Nothing: it upserts",
            'The clock: "the last N" before now() in its SQL.',
            "Not at all",
        ),
        (
            "c08_python_now",
            "load_day",
            "Nothing: it deletes its window of c08_visits",
            "The clock: datetime.now() in its code (line 17).",
            "Not at all",
        ),
        (
            "c13_retried_email",
            "mail_report",
            "Sends again: an email (EmailOperator) with no idempotency key.",
            "The run's logical date: {{ ds }} in its subject.",
            "Not safely: each of the 90 runs sends an email (EmailOperator) again; key it first.",
        ),
        (
            "c14_keyed_http",
            "post_settlement",
            "Nothing: an HTTP request (HttpOperator) carries an idempotency key",
            "The run's logical date: {{ ds }} in its headers.",
            "`airflow backfill create --dag-id c14_settlement",
        ),
        (
            "c20_running_total",
            "add_points",
            "Adds again: UPDATE c20_loyalty_accounts SET points = points + ... is a running total.",
            "The run's logical date",
            "Not safely: every window that already ran is added again",
        ),
        (
            "c21_high_water_mark",
            "load_new_events",
            "Loads nothing new",
            "The target's current contents: MAX(ts) FROM c21_events (a high-water mark).",
            "Not at all: its window comes from the target's high-water mark",
        ),
        (
            "c25_bash_date",
            "export_run_day",
            "Unknown: the linter cannot see what its bash command writes",
            "The run's logical date: {{ ds }} in its bash command.",
            "Unknown",
        ),
        (
            "c26_allow_functions",
            "write_orders",
            "Nothing: it deletes and rewrites its window of c26_orders (partition_column=order_date) in one "
            "transaction. And the rows it writes differ on every run: now() (the clock).",
            "The run's logical date plus granularity=day (PartitionOverwriteOperator).",
            "`airflow backfill create --dag-id c26_loaded_at",
        ),
        (
            "c34_catchup_no_schedule",
            "write_day",
            "Nothing",
            "The run's logical date plus granularity=day",
            "One window at a time: the DAG has no time schedule, so trigger each window with `airflow dags "
            "trigger c34_manual --logical-date YYYY-MM-DD`",
        ),
    ],
)
def test_each_task_answers_the_three_review_questions(
    name: str, task_id: str, runs_twice: str, window: str, backfill: str
) -> None:
    report = lint_paths([CORPUS / f"{name}.py"])
    found = task(report, task_id)
    assert found.runs_twice.startswith(runs_twice), found.runs_twice
    assert found.window.startswith(window), found.window
    assert found.backfill.startswith(backfill), found.backfill


def test_the_repository_dags() -> None:
    """dags/payouts.py: the naive DAG's append is found (acknowledged: it is the demo's contrast);
    the merge DAG answers as the README says; the file is clean for CI."""
    report = lint_paths([REPO / "dags" / "payouts.py"])
    assert report.failing == []
    appends = [f for f in report.acknowledged if f.rule == "IDEM002"]
    assert [(f.dag_id, f.task_id) for f in appends] == [("payouts_append_naive", "append_payouts")]
    assert "INSERT INTO payouts_naive" in appends[0].message
    merge = task(report, "merge_payouts")
    assert merge.runs_twice.startswith("Nothing: it merges on (sale_id) into payouts")
    assert merge.window == "The run's logical date plus granularity=day (MergeOperator)."
    assert merge.backfill.startswith("`airflow backfill create --dag-id payouts_merge ")
    # Two DAGs writing `payouts` is a real hazard if both are enabled: the linter says so.
    assert {(f.dag_id, f.task_id) for f in report.acknowledged if f.rule == "IDEM007"} == {
        ("payouts_overwrite", "write_payouts"),
        ("payouts_merge", "merge_payouts"),
    }


# --- static only, acknowledgements, errors ----------------------------------------------------------


DAG_TEMPLATE = """\
import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

{prelude}
with DAG(dag_id="tmp_dag", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    SQLExecuteQueryOperator(
        task_id="load",
        conn_id="warehouse",
        {comment}
        sql="INSERT INTO tmp_target SELECT * FROM tmp_source WHERE day = '{{{{ ds }}}}'",
    )
"""


def write_dag(tmp_path: Path, prelude: str = "", comment: str = "") -> Path:
    path = tmp_path / "tmp_dag.py"
    path.write_text(DAG_TEMPLATE.format(prelude=prelude, comment=comment))
    return path


def test_dag_files_are_read_never_imported(tmp_path: Path) -> None:
    path = write_dag(tmp_path, prelude='raise SystemExit("the linter imported the DAG file")')
    report = lint_paths([path])
    assert [f.rule for f in report.failing] == ["IDEM002"]


@pytest.mark.parametrize(
    "comment, reason",
    [
        ("# idempotent: ack IDEM002 an audit trail by design", "an audit trail by design"),
        ("# idempotent: ack append-insert rule names work too", "rule names work too"),
        ("# idempotent: ack IDEM006, IDEM002", ""),
    ],
)
def test_inline_acknowledgement(tmp_path: Path, comment: str, reason: str) -> None:
    report = lint_paths([write_dag(tmp_path, comment=comment)])
    assert report.failing == []
    assert [(f.rule, f.reason) for f in report.acknowledged] == [("IDEM002", reason)]
    assert report.exit_code == 0
    assert "acknowledged: " + (reason or "(no reason given)") in report.to_text()


def test_an_acknowledgement_of_another_rule_does_not_hide_the_finding(tmp_path: Path) -> None:
    report = lint_paths([write_dag(tmp_path, comment="# idempotent: ack IDEM001 not this one")])
    assert [f.rule for f in report.failing] == ["IDEM002"]


def test_a_file_that_is_not_python_is_a_finding(tmp_path: Path) -> None:
    path = tmp_path / "broken_dag.py"
    path.write_text("from airflow.sdk import DAG\nwith DAG(dag_id='x'\n")
    report = lint_paths([path])
    assert [(f.rule, f.line) for f in report.failing] == [("IDEM000", 2)]


def test_folders_are_searched_for_dag_files_only(tmp_path: Path) -> None:
    write_dag(tmp_path)
    (tmp_path / "helpers.py").write_text("def helper():\n    return 'INSERT INTO x VALUES (1)'\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "old_dag.py").write_text((tmp_path / "tmp_dag.py").read_text())
    report = lint_paths([tmp_path])
    assert [Path(f).name for f in report.files] == ["tmp_dag.py"]


@pytest.mark.parametrize(
    "sql, writes",
    [
        ("INSERT INTO a SELECT * FROM b", [("a", "append")]),
        ("DELETE FROM a WHERE d = '{{ ds }}'; INSERT INTO a SELECT 1", [("a", "delete"), ("a", "append")]),
        ("INSERT INTO s.a (x) VALUES (1) ON CONFLICT (x) DO NOTHING", [("s.a", "upsert")]),
        ("INSERT INTO a (x) VALUES (1) ON DUPLICATE KEY UPDATE x = VALUES(x)", [("a", "upsert")]),
        ("INSERT OR REPLACE INTO a VALUES (1)", [("a", "replace")]),
        ("REPLACE INTO a (x) VALUES (1)", [("a", "replace")]),
        ("MERGE INTO a USING b ON a.id = b.id WHEN MATCHED THEN UPDATE SET v = b.v", [("a", "merge")]),
        ("UPDATE a SET total = total + 1", [("a", "accumulate")]),
        ("UPDATE a SET total = 1", [("a", "update")]),
        ("TRUNCATE TABLE a", [("a", "truncate")]),
        ("CREATE TABLE IF NOT EXISTS a (x INT)", []),
        ("SELECT * FROM a", []),
    ],
)
def test_sql_writes(sql: str, writes: list[tuple[str, str]]) -> None:
    assert [(w.table, w.how) for w in sql_writes(sql)] == writes


# --- the command line -------------------------------------------------------------------------------


def test_cli_exit_status_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(CORPUS / "c01_overwrite_operator.py")]) == 0
    out = capsys.readouterr().out
    assert "If this runs twice?" in out and "0 finding(s)" in out
    assert main([str(CORPUS / "c03_naive_append.py")]) == 1
    out = capsys.readouterr().out
    assert re.search(r"c03_naive_append\.py:22: IDEM002 append-insert", out)
    assert "fix: write with PartitionOverwriteOperator" in out
    assert main([str(CORPUS / "c03_naive_append.py"), "--ignore", "IDEM002"]) == 0
    assert main([str(CORPUS / "c17_acknowledged_append.py")]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["/nonexistent/dags"],
        [str(CORPUS / "c01_overwrite_operator.py"), "--ignore", "IDEM999"],
        [str(CORPUS / "c01_overwrite_operator.py"), "--json", "--format", "text"],
        [str(CORPUS / "c01_overwrite_operator.py"), "--format", "yaml"],
        [],
    ],
    ids=["missing-path", "unknown-rule", "contradiction", "bad-format", "no-path"],
)
def test_cli_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(CORPUS / "c03_naive_append.py"), str(CORPUS / "c17_acknowledged_append.py")]
    assert main([*paths, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == {
        "files": 2,
        "tasks": 2,
        "findings": 1,
        "acknowledged": 1,
        "task_findings": 1,
        "by_rule": {"IDEM002": 1},
        "ignored_rules": [],
    }
    (finding,) = doc["findings"]
    assert finding["rule"] == "IDEM002" and finding["name"] == "append-insert"
    assert finding["line"] == 22 and finding["task_id"] == "append_payouts"
    assert finding["file"].endswith("c03_naive_append.py") and finding["fix"]
    (acked,) = doc["acknowledged"]
    assert acked["reason"] == "audit log: one row per attempt is the point"
    answers = {t["task_id"]: t["answers"] for t in doc["tasks"]}
    assert answers["append_payouts"]["if_this_runs_twice"].startswith("Appends again")
    assert set(answers["log_attempt"]) == {
        "if_this_runs_twice",
        "what_decides_its_window",
        "how_to_backfill_90_days",
    }
    assert main([*paths, "--json", "--ignore", "append-insert"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["ignored_rules"] == ["IDEM002"]


def test_register_adds_the_lint_subcommand() -> None:
    parser = argparse.ArgumentParser(prog="airflow-idempotent")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["lint", "dags", "--json", "--ignore", "IDEM007,IDEM005"])
    assert args.command == "lint" and args.paths == ["dags"] and args.json
    assert args.handler.__name__ == "run"
    help_text = parser._subparsers._group_actions[0].choices["lint"].format_help()  # type: ignore[union-attr]
    for rule in RULES.values():
        assert rule.id in help_text and rule.name in help_text


def test_rule_ids_are_stable() -> None:
    assert {rid: rule.name for rid, rule in RULES.items()} == {
        "IDEM000": "unreadable-dag",
        "IDEM001": "clock-sql",
        "IDEM002": "append-insert",
        "IDEM003": "clock-in-task-code",
        "IDEM004": "relative-window",
        "IDEM005": "unbounded-catchup",
        "IDEM006": "retried-unkeyed-side-effect",
        "IDEM007": "target-written-twice",
        "IDEM008": "accumulating-update",
        "IDEM009": "window-without-width",
    }


def test_text_report_lists_every_task_with_answers() -> None:
    text = lint_paths([CORPUS / "c16_target_twice.py"]).to_text()
    assert re.search(
        r"\n  c16_split_write\.load_day  \(\S*c16_target_twice\.py:23, SQLExecuteQueryOperator\)\n", text
    )
    assert (
        "    If this runs twice?                      Appends again: INSERT INTO c16_sessions with no window "
        "delete or key. And c16_sessions is also written by c16_split_write.clear_day.\n"
    ) in text
    assert "Information (safe to rerun here, not failed):\n" in text
    assert text.count(": IDEM007 [c16_split_write.") == 2 and ": IDEM002 [c16_split_write.load_day]" in text
    assert text.endswith("0 finding(s), 0 acknowledged; 2 task(s) in 1 file(s).\n")


# --- schedules (croniter) -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression, period",
    [
        ("15 * * * *", timedelta(hours=1)),
        ("0 */6 * * *", timedelta(hours=6)),
        ("0 9 * * *", timedelta(days=1)),
        ("0 0 * * 0", timedelta(days=7)),
        ("*/15 * * * *", timedelta(minutes=15)),
        # What the hand-written parser got wrong or could not read, croniter reads as Airflow does:
        ("*/7 * * * *", timedelta(seconds=400)),  # :00, :07 ... :56: nine an hour, not one every 7 minutes
        ("30 */5 * * *", timedelta(hours=4.8)),  # 00:30, 05:30 ... 20:30: five a day, not one every 5 hours
        ("0 9 * * 1-5", timedelta(days=1.4)),  # weekdays: five a week
        ("not a cron", None),
    ],
)
def test_cron_period_is_the_average_time_between_fire_times(
    expression: str, period: timedelta | None
) -> None:
    assert cron_period(expression) == period


@pytest.mark.parametrize(
    "expression, days",
    [("0 0 1 * *", 30.44), ("0 12 1,15 * *", 365.2425 / 24), ("0 0 1 1 *", 365.2425)],
)
def test_cron_period_of_calendar_schedules_is_their_average(expression: str, days: float) -> None:
    found = cron_period(expression)
    assert found is not None and abs(found - timedelta(days=days)) < timedelta(hours=1)


CATCHUP_DAG = """\
import pendulum
from datetime import timedelta
from airflow.sdk import DAG
from airflow_idempotent.operators import MergeOperator

START = pendulum.datetime(2024, 6, 1, tz="UTC")

with DAG(dag_id="catchup", schedule={schedule}, start_date=START, catchup=True):
    MergeOperator(task_id="m", table="t", key_columns=["k"], sql="SELECT k FROM s", granularity="day")
"""


@pytest.mark.parametrize(
    "schedule, counted",
    [('"0 9 * * 1-5"', True), ('"@quarterly"', True), ("timedelta(hours=3)", True), ("timedelta(1)", False)],
)
def test_unbounded_catchup_counts_its_windows_when_it_can(
    tmp_path: Path, schedule: str, counted: bool
) -> None:
    """timedelta(1) (a width the linter cannot read) used to crash the linter with ZeroDivisionError.
    A chosen catchup over a window operator is information (round 19), its backlog counted the same."""
    path = tmp_path / "catchup_dag.py"
    path.write_text(CATCHUP_DAG.format(schedule=schedule))
    report = lint_paths([path])
    assert report.failing == []
    (entry,) = [i for i in report.information if i.rule == "IDEM005"]
    assert ("so far, growing by one every period" in entry.message) is counted, entry.message


# --- issue 35: true but harmless here is information; what public repositories hid -----------------
# Small DAG files written for these tests (the shapes measured in docs/lint-evaluation.md, never
# copied from the public repositories).

_HEAD = """from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.utils.dates import days_ago
"""


def _lint(tmp_path: Path, body: str, name: str = "dag_35.py", **files: str) -> LintReport:
    for other, text in files.items():
        (tmp_path / other).write_text(text)
    (tmp_path / name).write_text(_HEAD + body)
    return lint_paths([tmp_path])


def _rules(findings: list) -> list[tuple[str, str | None]]:
    return sorted((f.rule, f.task_id) for f in findings)


def _sql_dag(dag_id: str, *tasks: tuple[str, str], extra: str = "") -> str:
    ops = "".join(
        f"    SQLExecuteQueryOperator(task_id={task!r}, conn_id='wh', sql={sql!r})\n" for task, sql in tasks
    )
    return (
        f"with DAG({dag_id!r}, schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False{extra}):\n"
        + ops
    )


def test_audit_column_set_to_now_is_information_not_a_finding(tmp_path: Path) -> None:
    report = _lint(
        tmp_path,
        _sql_dag(
            "audit",
            ("mark", "UPDATE orders SET status = 'done', updated_at = now() WHERE day = '{{ ds }}'"),
            (
                "snap",
                "INSERT INTO snap (id, loaded_at) SELECT id, now() FROM src",
            ),
        ),
    )
    # a load stamp on appended rows is still IDEM001 (rows keyed by id: `stamps`, test_lint_public14);
    # updated_at is an audit column
    assert sorted(_rules(seen(report))) == [("IDEM001", "snap"), ("IDEM002", "snap")]
    assert _rules(explained(report)) == [("IDEM001", "mark")]
    assert "updated_at, an audit column" in explained(report)[0].message


def test_retry_counter_is_information_and_a_running_total_is_not(tmp_path: Path) -> None:
    report = _lint(
        tmp_path,
        _sql_dag(
            "counters",
            ("retry", "UPDATE jobs SET sync_attempts = sync_attempts + 1 WHERE day = '{{ ds }}'"),
            ("total", "UPDATE ltv SET revenue = revenue + 10 WHERE day = '{{ ds }}'"),
        ),
    )
    assert _rules(report.findings) == [("IDEM008", "total")]
    assert _rules(report.information) == [("IDEM008", "retry")]


def test_insert_into_a_deduplicating_engine_is_no_append(tmp_path: Path) -> None:
    report = _lint(
        tmp_path,
        _sql_dag(
            "ch_set",
            ("create", "CREATE TABLE IF NOT EXISTS seen_wallets (address String) ENGINE = Set()"),
            ("add", "INSERT INTO seen_wallets (address) SELECT DISTINCT address FROM transfers"),
            ("plain", "INSERT INTO transfers_copy SELECT * FROM transfers"),
        ),
    )
    assert _rules(report.findings) == [("IDEM002", "plain")]


def test_each_dag_replacing_its_own_slice_of_one_table_is_information(tmp_path: Path) -> None:
    def scorer(name: str) -> str:
        return _sql_dag(
            f"score_{name}",
            (f"delete_{name}", f"ALTER TABLE scores DELETE WHERE score_id = '{name}'"),
            (f"insert_{name}", f"INSERT INTO scores SELECT '{name}', wallet, 1 FROM {name}_wallets"),
        )

    report = _lint(tmp_path, scorer("art") + scorer("music"))
    assert report.findings == []
    assert {f.task_id for f in report.information if f.rule == "IDEM007"} == {
        "delete_art",
        "insert_art",
        "delete_music",
        "insert_music",
    }
    assert {f.task_id for f in report.information if f.rule == "IDEM002"} == {"insert_art", "insert_music"}


def test_upsert_then_prune_and_two_appenders_are_information_each_append_stays_idem002(
    tmp_path: Path,
) -> None:
    """Two keyless appenders of one table leave each other's rows alone (issue 35, round 8): the
    pair is information; each one's own repeated rows on a retry are still its IDEM002."""
    upsert = (
        "INSERT INTO topics (id, name) SELECT id, name FROM src "
        "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name"
    )
    report = _lint(
        tmp_path,
        _sql_dag(
            "mirror", ("upsert", upsert), ("prune", "DELETE FROM topics WHERE id NOT IN (SELECT id FROM src)")
        )
        + _sql_dag(
            "events",
            ("load_web", "INSERT INTO events SELECT * FROM web WHERE day = '{{ ds }}'"),
            ("load_app", "INSERT INTO events SELECT * FROM app WHERE day = '{{ ds }}'"),
        ),
    )
    assert _rules(report.findings) == [("IDEM002", "load_app"), ("IDEM002", "load_web")]
    assert _rules([f for f in report.information if f.rule == "IDEM007"]) == [
        ("IDEM007", "load_app"),
        ("IDEM007", "load_web"),
        ("IDEM007", "prune"),
        ("IDEM007", "upsert"),
    ]


def test_days_ago_start_with_catchup_off_is_information(tmp_path: Path) -> None:
    body = (
        "with DAG('moot', schedule='@daily', start_date=days_ago(2), catchup=False):\n"
        "    SQLExecuteQueryOperator(task_id='t', conn_id='wh', sql='SELECT 1')\n"
        "with DAG('live', schedule='@daily', start_date=days_ago(2)):\n"
        "    SQLExecuteQueryOperator(task_id='t', conn_id='wh', sql='SELECT 1')\n"
        "with DAG('manual', schedule=None, start_date=days_ago(2)):\n"
        "    SQLExecuteQueryOperator(task_id='t', conn_id='wh', sql='SELECT 1')\n"
    )
    report = _lint(tmp_path, body)
    assert [(f.rule, f.dag_id) for f in report.findings] == [("IDEM003", "live")]
    assert sorted((f.rule, f.dag_id) for f in report.information) == [
        ("IDEM003", "manual"),
        ("IDEM003", "moot"),
    ]


def test_days_ago_in_default_args_counts_unless_the_dag_sets_its_own_start(tmp_path: Path) -> None:
    body = (
        "default_args = {'owner': 'data', 'start_date': days_ago(2)}\n"
        "dag = DAG('uses_default', default_args=default_args, schedule='*/5 * * * *')\n"
        "SQLExecuteQueryOperator(task_id='t', conn_id='wh', sql='SELECT 1', dag=dag)\n"
    )
    report = _lint(tmp_path, body)
    assert [(f.rule, f.dag_id, f.line) for f in report.findings] == [("IDEM003", "uses_default", 6)]
    overridden = body.replace(
        "default_args=default_args,", "default_args=default_args, start_date=datetime(2024, 1, 1),"
    )
    assert _lint(tmp_path, overridden).findings == []


def test_start_date_from_a_helper_of_the_repository_that_reads_the_clock(tmp_path: Path) -> None:
    helper = (
        "from airflow.utils.dates import days_ago\n\n\ndef start_from(days):\n    return days_ago(days)\n"
    )
    body = (
        "from helpers_35 import start_from\n"
        "dag = DAG('helped', start_date=start_from(3), schedule='@daily')\n"
        "SQLExecuteQueryOperator(task_id='t', conn_id='wh', sql='SELECT 1', dag=dag)\n"
    )
    report = _lint(tmp_path, body, **{"helpers_35.py": helper})
    assert [(f.rule, f.dag_id) for f in report.findings] == [("IDEM003", "helped")]
    assert "start_from() (which calls days_ago())" in report.findings[0].message


def test_a_dag_factory_is_a_dag_with_its_defaults(tmp_path: Path) -> None:
    factory = (
        "from airflow import DAG\n\n\n"
        "def make_dag(dag_id, schedule_interval=None, catchup=False, start_date=None):\n"
        "    return DAG(\n"
        "        dag_id, schedule_interval=schedule_interval, catchup=catchup, start_date=start_date\n"
        "    )\n"
    )
    body = (
        "from factory_35 import make_dag\n"
        "dag = make_dag(dag_id='made', schedule_interval='@daily', start_date=days_ago(2))\n"
        "SQLExecuteQueryOperator(task_id='t', conn_id='wh', sql='SELECT 1', dag=dag)\n"
    )
    report = _lint(tmp_path, body, **{"factory_35.py": factory})
    assert report.findings == []  # the factory's catchup=False default makes the moving start moot
    assert [(f.rule, f.dag_id) for f in report.information] == [("IDEM003", "made")]
    assert [(t.dag_id, t.task_id) for t in report.tasks] == [("made", "t")]


def test_information_is_listed_never_failed_nor_in_sarif(tmp_path: Path) -> None:
    from airflow_idempotent.lint.sarif import to_sarif

    report = _lint(
        tmp_path, _sql_dag("audit", ("mark", "UPDATE orders SET updated_at = now() WHERE day = '{{ ds }}'"))
    )
    assert report.findings == [] and len(report.information) == 1 and report.exit_code == 0
    assert to_sarif(report)["runs"][0]["results"] == []
    assert [i["rule"] for i in json.loads(report.to_json())["information"]] == ["IDEM001"]
    assert "Information (safe to rerun here, not failed):" in report.to_text()


_PY_HEAD = """from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator
"""


def _py_dag(tmp_path: Path, code: str, tasks: list[str], **files: str) -> LintReport:
    for other, text in files.items():
        (tmp_path / other).write_text(text)
    ops = "".join(f"    PythonOperator(task_id={t!r}, python_callable={t})\n" for t in tasks)
    dag = "with DAG('py35', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n" + ops
    (tmp_path / "py35.py").write_text(_PY_HEAD + code + "\n\n" + dag)
    return lint_paths([tmp_path])


def test_a_clock_read_only_to_time_a_call_is_no_window(tmp_path: Path) -> None:
    code = (
        "import requests\n\n\n"
        "def warm(**_):\n"
        "    begin = datetime.now()\n"
        "    requests.get('http://tiles/1.png')\n"
        "    end = datetime.now()\n"
        "    print(f'took {end - begin}')\n\n\n"
        "def recent(**_):\n"
        "    since = datetime.now()\n"
        "    rows = requests.get('http://api/rows', params={'after': since - timedelta(hours=2)})\n"
        "    return rows.json()\n"
    )
    report = _py_dag(tmp_path, "from datetime import timedelta\n" + code, ["warm", "recent"])
    assert [(f.rule, f.task_id) for f in report.findings] == [("IDEM004", "recent")]


def test_sql_sent_through_a_client_query_method_is_read(tmp_path: Path) -> None:
    code = (
        "def load(client, **_):\n"
        "    client.query(\"INSERT INTO events SELECT * FROM raw WHERE day = '{{ ds }}'\")\n"
    )
    report = _py_dag(tmp_path, code, ["load"])
    assert [(f.rule, f.task_id) for f in report.findings] == [("IDEM002", "load")]


def test_functions_imported_from_the_repositorys_own_modules_are_followed(tmp_path: Path) -> None:
    helper = (
        "def load_new_rows(hook):\n"
        "    hook.run('INSERT INTO fact_orders SELECT * FROM raw_orders "
        "WHERE id > (SELECT MAX(id) FROM fact_orders)')\n"
    )
    code = "from wm_35 import load_new_rows\n\n\ndef load(hook, **_):\n    load_new_rows(hook)\n"
    report = _py_dag(tmp_path, code, ["load"], **{"wm_35.py": helper})
    assert [(f.rule, f.task_id, Path(f.file).name, f.line) for f in report.findings] == [
        ("IDEM004", "load", "wm_35.py", 2)
    ]


def test_a_clock_that_only_stands_in_for_a_missing_param_is_information(tmp_path: Path) -> None:
    code = (
        "def listing(params, **_):\n"
        "    day = params['date'] if params.get('date') else datetime.now().strftime('%m%d')\n"
        "    return f'raw/{day}'\n\n\n"
        "def today_only(**_):\n"
        "    return f'raw/{datetime.now():%m%d}'\n"
    )
    report = _py_dag(tmp_path, code, ["listing", "today_only"])
    assert [(f.rule, f.task_id) for f in report.findings] == [("IDEM003", "today_only")]
    assert [(f.rule, f.task_id) for f in report.information] == [("IDEM003", "listing")]


def test_a_processed_flag_queue_is_information_a_plain_copy_is_not(tmp_path: Path) -> None:
    code = (
        "def drain(conn, **_):\n"
        "    cur = conn.cursor()\n"
        "    cur.execute('SELECT id, amount FROM payouts WHERE paid_at IS NULL LIMIT 500')\n"
        "    for row in cur.fetchall():\n"
        "        cur.execute('INSERT INTO ledger (payout_id, amount) VALUES (%s, %s)', row)\n"
        "        cur.execute('UPDATE payouts SET paid_at = %s WHERE id = %s', ('{{ ts }}', row[0]))\n"
        "    conn.commit()\n\n\n"
        "def copy(conn, **_):\n"
        "    cur = conn.cursor()\n"
        "    cur.execute('SELECT id FROM payouts WHERE paid_at IS NULL')\n"
        "    cur.execute('INSERT INTO ledger_copy SELECT * FROM ledger')\n"
    )
    report = _py_dag(tmp_path, code, ["drain", "copy"])
    assert [(f.rule, f.task_id) for f in report.findings] == [("IDEM002", "copy")]
    assert [(f.rule, f.task_id) for f in report.information] == [("IDEM002", "drain")]


def test_a_dag_factorys_default_retries_reach_a_task_that_posts(tmp_path: Path) -> None:
    factory = (
        "from airflow import DAG\n\n\n"
        "def make_dag(dag_id, schedule_interval=None, retries=2, catchup=False):\n"
        "    args = {'retries': retries}\n"
        "    dag = DAG(dag_id, schedule_interval=schedule_interval, catchup=catchup, default_args=args)\n"
        "    return dag\n"
    )
    code = (
        "import requests\n"
        "from factory_post_35 import make_dag\n\n\n"
        "def notify(**_):\n"
        "    requests.post('https://hooks.example/notify', json={'text': 'done'})\n\n\n"
        "dag = make_dag(dag_id='posting', schedule_interval='@daily')\n"
        "PythonOperator(task_id='notify', python_callable=notify, dag=dag)\n"
    )
    (tmp_path / "factory_post_35.py").write_text(factory)
    (tmp_path / "posting.py").write_text(_PY_HEAD + code)
    report = lint_paths([tmp_path])
    assert [(f.rule, f.dag_id, f.task_id) for f in report.findings] == [("IDEM006", "posting", "notify")]
    assert "retries=2" in report.findings[0].message


def test_implicit_catchup_follows_the_deployment_default(tmp_path: Path) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "implicit.py").write_text(
        "from datetime import datetime\n\nfrom airflow import DAG\n"
        "from airflow.operators.bash import BashOperator\n\n"
        "with DAG('implicit', schedule='@daily', start_date=datetime(2023, 1, 1)):\n"
        "    BashOperator(task_id='t', bash_command='refresh-all')\n"  # no window: the backlog repeats it
    )
    assert lint_paths([tmp_path]).findings == []  # schedule= (Airflow 3's spelling), no setting known
    assert [(f.rule, f.line) for f in lint_paths([tmp_path], catchup_default=True).findings] == [
        ("IDEM005", 6)
    ]
    (tmp_path / "airflow.cfg").write_text("[scheduler]\ncatchup_by_default = True\n")
    found = lint_paths([tmp_path]).findings
    assert [(f.rule, f.dag_id) for f in found] == [("IDEM005", "implicit")] and "airflow.cfg" in found[
        0
    ].message
    (tmp_path / "airflow.cfg").write_text("[scheduler]\ncatchup_by_default = False\n")
    (tmp_path / ".env").write_text("AIRFLOW__SCHEDULER__CATCHUP_BY_DEFAULT=true\n")
    assert lint_paths([tmp_path]).findings == []  # airflow.cfg is read first
    assert main(["--catchup-default", "off", str(tmp_path)]) == 0
    assert main(["--catchup-default", "on", str(tmp_path)]) == 1


def _first_run_context(timetable: object) -> dict[str, object]:
    """The context of a timetable's first scheduled run, as Airflow computes it."""
    import pendulum
    from airflow.timetables.base import TimeRestriction

    start = pendulum.datetime(2026, 1, 1, tz="UTC")
    restriction = TimeRestriction(earliest=start, latest=None, catchup=True)
    info = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)  # type: ignore[attr-defined]
    return {
        "data_interval_start": info.data_interval.start,
        "data_interval_end": info.data_interval.end,
        "logical_date": info.logical_date,
    }


def test_window_without_width_is_what_airflow_3_gives_and_fails_every_run(tmp_path: Path) -> None:
    """IDEM009's premise, from Airflow itself: a "@daily" (timedelta) DAG gets a trigger timetable
    whose runs' data interval is one point, and the operators' window then fails with WindowError
    unless the operator declares a granularity; the corpus file's two such tasks are the findings."""
    import pendulum
    from airflow.sdk import DAG
    from airflow.timetables.trigger import CronTriggerTimetable, DeltaTriggerTimetable

    from airflow_idempotent.errors import WindowError
    from airflow_idempotent.window import window_from_context

    start = pendulum.datetime(2026, 1, 1, tz="UTC")
    assert type(DAG("d", schedule="@daily", start_date=start).timetable).__name__ == "CronTriggerTimetable"
    assert type(DAG("h", schedule=timedelta(hours=6), start_date=start).timetable).__name__ == (
        "DeltaTriggerTimetable"
    )
    for timetable in (
        CronTriggerTimetable("0 0 * * *", timezone="UTC"),
        DeltaTriggerTimetable(timedelta(hours=6)),
    ):
        context = _first_run_context(timetable)
        assert context["data_interval_start"] == context["data_interval_end"]
        with pytest.raises(WindowError, match="declares no granularity"):
            window_from_context(context, None, quiet=True)
        window = window_from_context(context, "day", quiet=True)
        assert window.end - window.start == timedelta(days=1)
    widths = CronTriggerTimetable("0 0 * * *", timezone="UTC", interval=timedelta(days=1))
    window = window_from_context(_first_run_context(widths), None, quiet=True)
    assert window.end - window.start == timedelta(days=1)

    report = lint_paths([CORPUS / "c36_window_without_width.py"])
    assert [(f.rule, f.dag_id, f.task_id) for f in report.findings] == [
        ("IDEM009", "c36_daily_no_granularity", "write_revenue"),
        ("IDEM009", "c36_trigger_timetables", "merge_payouts"),
    ]
    assert report.information == []  # an error, never information

    # the deployment turns cron data intervals on: the cron DAG's runs have width, the timedelta's not
    (tmp_path / "c36.py").write_text((CORPUS / "c36_window_without_width.py").read_text())
    (tmp_path / "airflow.cfg").write_text("[scheduler]\ncreate_cron_data_intervals = True\n")
    assert [f.dag_id for f in lint_paths([tmp_path]).findings] == ["c36_trigger_timetables"]
    (tmp_path / ".env").write_text("AIRFLOW__SCHEDULER__CREATE_DELTA_DATA_INTERVALS=true\n")
    assert lint_paths([tmp_path]).findings == []


def test_window_without_width_only_for_this_packages_operators(tmp_path: Path) -> None:
    (tmp_path / "other.py").write_text(
        "import pendulum\nfrom airflow.sdk import DAG\nfrom mycompany.operators import MergeOperator\n\n"
        "with DAG('other', schedule='@daily', start_date=pendulum.datetime(2026, 1, 1, tz='UTC')):\n"
        "    MergeOperator(task_id='m', table='t', key_columns=['id'], sql='SELECT 1 AS id')\n"
        "with DAG('defaults', schedule='@daily', start_date=pendulum.datetime(2026, 1, 1, tz='UTC'),\n"
        "         default_args={'granularity': 'day'}):\n"
        "    from airflow_idempotent.operators import PartitionOverwriteOperator\n"
        "    PartitionOverwriteOperator(task_id='p', table='t2', partition_column='d', sql='SELECT 1 AS d')\n"
    )
    assert [f.rule for f in lint_paths([tmp_path]).findings if f.rule == "IDEM009"] == []


def test_writers_of_disjoint_columns_are_information_a_shared_column_is_not(tmp_path: Path) -> None:
    """Three DAGs upsert one table on its key, each adding to its own counters; two share a counter."""

    def counter(name: str, *columns: str) -> str:
        sets = ", ".join(f"{c} = r.{c} + EXCLUDED.{c}" for c in columns)
        return _sql_dag(
            name,
            (
                f"load_{name}",
                f"INSERT INTO reports AS r (day, user_id, {', '.join(columns)}) SELECT day, user_id, "
                f"{', '.join(columns)} FROM {name}_src ON CONFLICT (day, user_id) DO UPDATE SET {sets}, "
                "updated_at = now()",
            ),
        )

    report = _lint(
        tmp_path,
        counter("exams", "exams_done", "exam_minutes")
        + counter("quizzes", "quizzes_done")
        + counter("videos", "quizzes_done", "video_minutes"),
    )
    shared = [(f.dag_id, f.task_id) for f in report.findings if f.rule == "IDEM007"]
    assert sorted(shared) == [("quizzes", "load_quizzes"), ("videos", "load_videos")]
    assert [f.dag_id for f in report.information if f.rule == "IDEM007"] == ["exams"]
    assert sorted(f.dag_id for f in report.findings if f.rule == "IDEM008") == ["exams", "quizzes", "videos"]


def test_sql_returned_by_a_helper_of_the_dag_file_is_read(tmp_path: Path) -> None:
    """``sql=delete_sql(db)`` in a loop: the helper's f-string with the loop's value, so the delete
    before the loader is seen (the loader is information, not IDEM002)."""
    code = (
        "def delete_sql(db):\n"
        "    return f\"ALTER TABLE {db}.audiences DELETE WHERE source = 'claimed'\"\n\n\n"
        "with DAG('audiences', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    for db in ['eth', 'polygon']:\n"
        "        clear = SQLExecuteQueryOperator(task_id=f'clear_{db}', conn_id='ch', sql=delete_sql(db))\n"
        "        load = SQLExecuteQueryOperator(task_id=f'load_{db}', conn_id='ch',\n"
        "            sql=f\"INSERT INTO {db}.audiences SELECT 'claimed', * FROM {db}.claimed\")\n"
        "        clear >> load\n"
    )
    report = _lint(tmp_path, code)
    assert [f.rule for f in report.findings] == []
    # one code site (the loop's f-string), reached by both tasks (round 36g: one entry listing them)
    (site,) = [f for f in report.information if f.rule == "IDEM002"]
    assert sorted(task for _dag, task in site.tasks) == ["load_eth", "load_polygon"]


def test_a_failure_alert_and_a_batch_cursor_are_information(tmp_path: Path) -> None:
    code = (
        "from airflow.models import Variable\n"
        "from airflow.operators.email import EmailOperator\n"
        "from airflow.operators.python import PythonOperator\n\n\n"
        "def next_batch():\n"
        "    page = int(Variable.get('wallets_batch_offset', default_var=0))\n"
        "    return page\n\n\n"
        "def advance():\n"
        "    Variable.set('wallets_batch_offset', 1)\n\n\n"
        "def since_mark():\n"
        "    return Variable.get('orders_last_synced_at')\n\n\n"
        "def save_mark():\n"
        "    Variable.set('orders_last_synced_at', '2024-01-01')\n\n\n"
        "with DAG('alerts', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False,\n"
        "         default_args={'retries': 2}):\n"
        "    PythonOperator(task_id='next_batch', python_callable=next_batch)\n"
        "    PythonOperator(task_id='advance', python_callable=advance)\n"
        "    PythonOperator(task_id='since_mark', python_callable=since_mark)\n"
        "    PythonOperator(task_id='save_mark', python_callable=save_mark)\n"
        "    EmailOperator(task_id='alert', to='a@b.c', subject='failed', html_content='x',\n"
        "                  trigger_rule='one_failed')\n"
        "    EmailOperator(task_id='report', to='a@b.c', subject='daily', html_content='x')\n"
    )
    report = _lint(tmp_path, code)
    assert _rules(seen(report)) == [("IDEM004", "since_mark"), ("IDEM006", "report")]
    assert ("IDEM006", "alert") in _rules(explained(report))
    assert ("IDEM004", "next_batch") in _rules(explained(report))


# Round 2 of issue 35: shapes of the tuning repositories (written here, never copied).


def test_one_table_name_in_two_databases_is_two_tables(tmp_path: Path) -> None:
    code = (
        "from airflow.providers.microsoft.mssql.operators.mssql import MsSqlOperator\n\n"
        "with DAG('etl_dbs', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    MsSqlOperator(task_id='mark_a', mssql_conn_id='dwh', database='lake_a',\n"
        "                  sql='INSERT INTO etl_tables SELECT name FROM src')\n"
        "    MsSqlOperator(task_id='mark_b', mssql_conn_id='dwh', database='lake_b',\n"
        "                  sql='INSERT INTO etl_tables SELECT name FROM src')\n"
        "    MsSqlOperator(task_id='mark_b_again', mssql_conn_id='dwh', database='LAKE_B',\n"
        "                  sql='INSERT INTO etl_tables SELECT name FROM src')\n"
        "    for db in ['lake_c', 'lake_d']:\n"
        "        MsSqlOperator(task_id=f'loop_{db}', mssql_conn_id='dwh', database=DBS[db],\n"
        "                      sql='UPDATE etl_tables SET name = upper(name)')\n"
    )
    report = _lint(tmp_path, code)
    # lake_a's writer is alone; lake_b is written by two tasks (its name's case does not matter);
    # the loop's databases are only known at run time: each task's own, never paired. Two appenders
    # are paired as information (round 8), so the pairing is read there.
    shared = sorted(f.task_id for f in report.information if f.rule == "IDEM007")
    assert shared == ["mark_b", "mark_b_again"]
    assert not [f for f in report.findings if f.rule == "IDEM007"]
    assert sorted(f.task_id for f in report.findings if f.rule == "IDEM002") == [
        "mark_a",
        "mark_b",
        "mark_b_again",
    ]


def test_flags_two_tasks_set_to_literals_are_information_a_data_update_is_not(tmp_path: Path) -> None:
    lock = _sql_dag(
        "locked",
        ("take_lock", "UPDATE dag_lock SET available = False"),
        ("release_lock", "UPDATE dag_lock SET available = TRUE, holder = NULL"),
        ("refresh", "UPDATE prices SET price = 0 WHERE day = '{{ ds }}'"),
        ("reprice", "UPDATE prices AS p SET price = s.price FROM staged AS s WHERE p.id = s.id"),
    )
    report = _lint(tmp_path, lock)
    assert _rules(seen(report)) == [("IDEM007", "refresh"), ("IDEM007", "reprice")]
    assert _rules([f for f in explained(report) if f.rule == "IDEM007"]) == [
        ("IDEM007", "release_lock"),
        ("IDEM007", "take_lock"),
    ]
    assert "flags set to literals" in explained(report)[0].message


def test_a_duration_since_a_start_pulled_from_xcom_is_no_window(tmp_path: Path) -> None:
    code = (
        "from datetime import timedelta\n\n\n"
        "def took(ti, **_):\n"
        "    started = ti.xcom_pull(key='started')\n"
        "    elapsed = datetime.now() - started\n"
        "    ti.xcom_push(key='duration', value=int(elapsed.total_seconds()))\n\n\n"
        "def seconds(ti, **_):\n"
        "    return (datetime.now() - ti.xcom_pull(key='started')).seconds\n\n\n"
        "def window(ti, **_):\n"
        "    lookback = ti.xcom_pull(key='lookback')\n"
        "    since = datetime.now() - lookback\n"
        "    return since.isoformat()\n"
    )
    report = _py_dag(tmp_path, code, ["took", "seconds", "window"])
    # a datetime minus a span is a datetime (no total_seconds / seconds): only `window` is a window
    assert [(f.rule, f.task_id) for f in report.findings] == [("IDEM004", "window")]


def test_module_level_calls_of_an_imported_clock_helper_are_read_in_each_file(tmp_path: Path) -> None:
    helper = (
        "import datetime\n\n\n"
        "def last_month():\n"
        "    first = datetime.date.today().replace(day=1)\n"
        "    return (first - datetime.timedelta(days=1)).strftime('%Y%m')\n\n\n"
        "def fixed():\n"
        "    return '202401'\n"
    )
    body = (
        "from periods_35 import fixed, last_month\n"
        "period = last_month()\n"
        "other = fixed()\n"
        "with DAG('{name}', schedule='@monthly', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    SQLExecuteQueryOperator(task_id='load', conn_id='wh',\n"
        "        sql=f\"DELETE FROM m_{name} WHERE period = '{period}'; \"\n"
        '            f"INSERT INTO m_{name} SELECT * FROM s_{other}")\n'
    )
    (tmp_path / "periods_35.py").write_text(helper)
    (tmp_path / "monthly_b.py").write_text(_HEAD + body.replace("{name}", "monthly_b"))
    report = _lint(tmp_path, body.replace("{name}", "monthly_a"), name="monthly_a.py")
    # line 7 = the 5 lines of _HEAD + 2; one finding per file (module-level code of two files is two
    # owners), a relative window (the clock shifted by a day inside the helper); fixed() reads no clock
    assert sorted((Path(f.file).name, f.rule, f.line, f.dag_id) for f in report.findings) == [
        ("monthly_a.py", "IDEM004", 7, None),
        ("monthly_b.py", "IDEM004", 7, None),
    ]
    assert "last_month() (which calls datetime.date.today())" in report.findings[0].message


def test_rows_older_than_a_cutoff_are_information_the_last_n_days_are_a_window(tmp_path: Path) -> None:
    report = _lint(
        tmp_path,
        _sql_dag(
            "cutoffs",
            ("purge", "DELETE FROM events WHERE created_at < now() - interval '30 days'"),
            ("expire", "UPDATE jobs SET expires_at = '{{ ds }}' WHERE CURRENT_DATE - 30 > created_on"),
            ("recent", "INSERT INTO recent_events SELECT * FROM events WHERE ts >= now() - interval '1 day'"),
        ),
    )
    # created_at < cutoff and cutoff > created_on: upper bounds (retention, expiry); ts >= ..: the last day
    assert _rules([f for f in report.findings if f.rule == "IDEM004"]) == [("IDEM004", "recent")]
    assert _rules([f for f in report.information if f.rule == "IDEM004"]) == [
        ("IDEM004", "expire"),
        ("IDEM004", "purge"),
    ]


def test_a_cleanup_function_and_a_slack_report_read_the_clock_as_information(tmp_path: Path) -> None:
    code = (
        "from datetime import date, timedelta\n"
        "from pathlib import Path\n\n\n"
        "def cleanup_old_backups(**_):\n"
        "    oldest = date.today() - timedelta(days=7)\n"
        "    for f in Path('/backup').glob('*.gz'):\n"
        "        if date.fromtimestamp(f.stat().st_mtime) < oldest:\n"
        "            f.unlink()\n\n\n"
        "def info_slack(client, **_):\n"
        "    day = date.today()\n"
        "    client.chat_postMessage(channel='#data', text=f'runs on {day}')\n\n\n"
        "def load_recent(hook, **_):\n"
        "    since = date.today() - timedelta(days=7)\n"
        "    return hook.get_records('SELECT * FROM src WHERE day >= %s', parameters=[since])\n"
    )
    report = _py_dag(tmp_path, code, ["cleanup_old_backups", "info_slack", "load_recent"])
    assert [(f.rule, f.task_id) for f in report.findings] == [("IDEM004", "load_recent")]
    assert sorted((f.rule, f.task_id) for f in report.information) == [
        ("IDEM003", "info_slack"),
        ("IDEM004", "cleanup_old_backups"),
    ]


def test_an_airflow_2_dag_without_catchup_takes_airflow_2s_default(tmp_path: Path) -> None:
    def dag(dag_id: str, args: str) -> str:
        return (
            f"dag_{dag_id} = DAG({dag_id!r}, start_date=datetime(2024, 1, 1), {args})\n"
            f"SQLExecuteQueryOperator(task_id='t', conn_id='wh', sql='SELECT 1', dag=dag_{dag_id})\n"
        )

    body = (
        dag("old", "schedule_interval='@daily'")
        + dag("old_off", "schedule_interval='@daily', catchup=False")
        + dag("new", "schedule='@daily'")
    )
    report = _lint(tmp_path, body)
    # schedule_interval= exists only in Airflow 2, whose catchup_by_default is on; schedule= may be
    # Airflow 3 (default off): not judged without the deployment's setting
    assert [(f.rule, f.dag_id, f.line) for f in report.findings] == [("IDEM005", "old", 6)]
    assert "Airflow 2's: the DAG spells schedule_interval=" in report.findings[0].message
    assert lint_paths([tmp_path], catchup_default=False).findings == []


def test_a_clock_read_in_an_imported_helper_is_reported_where_it_is_written(tmp_path: Path) -> None:
    helper = (
        "from datetime import datetime, timedelta\n\n\n"
        "def since_yesterday(hook):\n"
        "    since = datetime.now() - timedelta(days=1)\n"
        "    return hook.get_records('SELECT * FROM src WHERE ts >= %s', parameters=[since])\n"
    )
    code = (
        "from clock_helper_35 import since_yesterday\n\n\ndef load(hook, **_):\n    since_yesterday(hook)\n"
    )
    report = _py_dag(tmp_path, code, ["load"], **{"clock_helper_35.py": helper})
    # line 5 of the helper's own file, not line 5 of the DAG file
    assert [(f.rule, f.task_id, Path(f.file).name, f.line) for f in report.findings] == [
        ("IDEM004", "load", "clock_helper_35.py", 5)
    ]


def test_a_relative_window_in_a_dag_run_only_when_triggered_is_information(tmp_path: Path) -> None:
    sql = "INSERT INTO recent SELECT * FROM events WHERE ts >= now() - interval '7 days'"
    manual = (
        "with DAG('by_hand', schedule=None, start_date=datetime(2024, 1, 1), catchup=False):\n"
        f"    SQLExecuteQueryOperator(task_id='load', conn_id='wh', sql={sql!r})\n"
        "    SQLExecuteQueryOperator(task_id='stamp', conn_id='wh',\n"
        "        sql='INSERT INTO marks SELECT now(), count(*) FROM events ON CONFLICT DO NOTHING')\n"
    )
    scheduled = _sql_dag("daily", ("load", sql.replace("recent", "recent_daily")))
    report = _lint(tmp_path, manual + scheduled)
    # schedule=None: no scheduled window to miss, the 7-day window is information; the clock written
    # by `stamp` is still IDEM001 (only relative windows change), and the daily DAG's window is IDEM004
    assert sorted((f.rule, f.dag_id, f.task_id) for f in seen(report)) == [
        ("IDEM001", "by_hand", "stamp"),
        ("IDEM002", "by_hand", "load"),
        ("IDEM002", "daily", "load"),
        ("IDEM004", "daily", "load"),
    ]
    assert [(f.rule, f.dag_id) for f in explained(report) if f.rule == "IDEM004"] == [("IDEM004", "by_hand")]

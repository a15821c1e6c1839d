"""The idempotency harness on real databases: it catches the naive append, passes overwrite and merge.

Every attempt runs the operator's own execute(context) in a forked child that SIGKILLs itself at
the chosen point (no scheduler: these are not `dagrun` tests). Expected figures come from the
scenario's formula (tests/test_operators.py) and the package's independent oracles, never from the
harness under test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.standard.operators.python import PythonOperator

from airflow_idempotent.examples.payouts import create_payouts, create_sales, simulate_crash, table_checksum
from airflow_idempotent.testing import (
    Crash,
    HarnessError,
    NotIdempotentError,
    TableState,
    assert_idempotent,
    check_idempotent,
    compare_tables,
    scenarios,
)
from tests.test_operators import DAY, day_truth, make

REPO = Path(__file__).resolve().parent.parent
PAYOUT_DAGS = REPO / "dags" / "payouts.py"
FIRST_SALE_OF_DAY = 48001  # sale_id = i, 2,000 a day from 2026-08-01: the 25th starts at 24 * 2000 + 1


@pytest.fixture
def loaded(warehouse: Any) -> Any:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    return warehouse


# --- the payouts DAGs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("warehouse", ["sqlite", "postgres", "duckdb"], indirect=True)
def test_catches_the_naive_append_dag_and_names_the_duplicated_rows(loaded: Any) -> None:
    report = check_idempotent(PAYOUT_DAGS, DAY, dag_id="payouts_append_naive", engine=loaded.engine, runs=2)
    assert not report.ok
    assert report.targets == {"append_payouts": ["payouts_naive"]}
    assert report.clean["payouts_naive"].row_count == 2000
    names = [s.name for s in report.scenarios]
    assert names == [
        "run x2",
        "append_payouts: crash before the write, then run x1",
        "append_payouts: crash after commit, then run x1",
    ]
    assert any("crash during is not available" in s for s in report.skipped)  # one atomic INSERT
    rerun, before, after_commit = report.scenarios
    # A crash before the write then one run is one run; a crash after the commit then a run is two.
    assert before.ok and before.attempts[1].outcome == "crashed"
    assert "before execute()" in before.attempts[1].detail
    for scenario in (rerun, after_commit):
        (diff,) = scenario.diffs
        assert diff.table == "payouts_naive" and diff.key == ("sale_id",)
        assert diff.kinds == ["rows duplicated"]
        assert diff.actual.row_count == 4000 and len(diff.duplicated) == 2000
        assert diff.duplicated[0] == ((str(FIRST_SALE_OF_DAY),), 2, 1)
    assert report.broken() == {
        "append_payouts": [
            "run x2: rows duplicated",
            "append_payouts: crash after commit, then run x1: rows duplicated",
        ]
    }
    text = report.text()
    assert f"rows duplicated: 2,000 keys (2,000 extra copies), e.g. sale_id {FIRST_SALE_OF_DAY} x2" in text
    assert "BROKEN by append_payouts (SQLExecuteQueryOperator)" in text
    # The targets are put back as they were found: payouts_naive did not exist.
    assert not sa.inspect(loaded.engine).has_table("payouts_naive")


@pytest.mark.parametrize("warehouse", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("dag_id", ["payouts_overwrite", "payouts_merge"])
def test_passes_the_overwrite_and_merge_dags_through_every_crash(loaded: Any, dag_id: str) -> None:
    simulate_crash(loaded.engine, DAY, rows=1247)  # what a crashed naive writer left behind
    before = table_checksum(loaded.engine, "payouts")
    report = assert_idempotent(PAYOUT_DAGS, DAY, dag_id=dag_id, engine=loaded.engine, runs=2)
    assert report.ok, report.text()
    assert report.clean["payouts"].row_count == day_truth(DAY)[0]
    assert [s.name.split(": ", 1)[-1] for s in report.scenarios] == [
        "run x2",
        "crash before the write, then run x1",
        "crash during (after write statement 1), then run x1",
        "crash after commit, then run x1",
    ]
    for scenario in report.scenarios[1:]:
        crashed = [a for a in scenario.attempts if a.crash is not None]
        assert [a.outcome for a in crashed] == ["crashed"], scenario.attempts
    during = report.scenarios[2].attempts[1]
    assert "before commit" in during.detail
    assert table_checksum(loaded.engine, "payouts") == before  # restored as found


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_the_check_never_writes_into_the_real_history_store(loaded: Any) -> None:
    """The check's clean run, reruns and crashes are experiments: they go to a throw-away store, so
    `airflow-idempotent history` and the UI of the deployment the check runs in never show them."""
    from airflow_idempotent.history.store import HistoryStore
    from airflow_idempotent.testing.harness import run_id as harness_run_id
    from airflow_idempotent.window import window_of

    store = HistoryStore.from_airflow()
    store.migrate()
    before = store.writes()
    task = make("overwrite")
    report = check_idempotent(task, DAY, engine=loaded.engine, runs=2, crashes="none")
    assert report.ok, report.text()
    assert store.writes() == before
    clean_run = harness_run_id("clean", window_of(DAY, timedelta(days=1)))
    assert not store.writes(run_id=clean_run)
    # and the operator does record history outside the check, into that same store
    assert task.record_history and task.history_conn_id == "idempotent_history"
    assert os.environ.get("AIRFLOW_CONN_IDEMPOTENT_HISTORY") is None  # the check put it back


@pytest.mark.parametrize("warehouse", ["mariadb", "duckdb"], indirect=True)
@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_kills_inside_the_operators_transaction(loaded: Any, strategy: str) -> None:
    """Task mode (no DAG): a crash after the first write statement commits nothing (MariaDB, DuckDB)."""
    report = check_idempotent(make(strategy), DAY, engine=loaded.engine, runs=2, crashes=["during"])
    assert report.ok, report.text()
    crashed = report.scenarios[1].attempts[0]
    assert crashed.outcome == "crashed" and crashed.crash == Crash("during")
    assert "after DELETE #1, before commit" in crashed.detail


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_random_crashes_are_seeded_and_reported(loaded: Any) -> None:
    report = check_idempotent(
        make("merge"), DAY, engine=loaded.engine, runs=2, crashes="random", seed=7, random_scenarios=2
    )
    assert report.ok, report.text()
    assert report.seed == 7 and "seed 7" in report.text()
    assert [s.name for s in report.scenarios[1:]] == [s.name for s in _plan_for_seed(7)[1:]]


def _plan_for_seed(seed: int) -> list[Any]:
    task = make("merge")
    return scenarios.plan([task], 2, "random", seed, 2)[0]


def test_the_random_plan_depends_only_on_the_seed() -> None:
    plans = {seed: [s.attempts for s in _plan_for_seed(seed)] for seed in range(6)}
    assert plans[3] == [s.attempts for s in _plan_for_seed(3)]
    assert len({repr(p) for p in plans.values()}) > 1
    for plan in plans.values():
        assert all(attempts[-1] is None for attempts in plan)  # every scenario ends with a complete run


# --- how it breaks: drift, missing rows, a multi-statement crash ---------------------------------------


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_names_drifting_values(loaded: Any) -> None:
    with loaded.engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE scores (id BIGINT PRIMARY KEY, sale_date DATE, score INTEGER)"))
    task = SQLExecuteQueryOperator(
        task_id="score_sales",
        conn_id="warehouse",
        sql=(
            "INSERT INTO scores (id, sale_date, score) SELECT sale_id, sale_date, abs(random()) % 1000000 "
            "FROM sales WHERE sale_date = '{{ ds }}' AND sale_id < 48004 "
            "ON CONFLICT (id) DO UPDATE SET score = excluded.score"
        ),
    )
    report = check_idempotent(task, DAY, engine=loaded.engine, runs=2, crashes="none")
    assert report.targets == {"score_sales": ["scores"]}  # read from the SQL: no declaration needed
    (scenario,) = report.scenarios
    (diff,) = scenario.diffs
    assert diff.kinds == ["values drifting"] and diff.key == ("id",)
    assert {k for k, _ in diff.drifted} <= {("48001",), ("48002",), ("48003",)}
    key, changes = diff.drifted[0]
    assert list(changes) == ["score"]
    assert f"values drifting: {len(diff.drifted)} keys, e.g. id {key[0]}: score " in report.text()


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_names_missing_rows_and_crashes_between_statements(loaded: Any) -> None:
    """A job that consumes its input: the rerun finds the inbox empty and wipes the copy."""
    with loaded.engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE inbox (msg_id INTEGER PRIMARY KEY, body TEXT)"))
        conn.execute(sa.text("CREATE TABLE inbox_copy (msg_id INTEGER PRIMARY KEY, body TEXT)"))
        conn.execute(sa.text("INSERT INTO inbox VALUES (1, 'a'), (2, 'b'), (3, 'c')"))
    task = SQLExecuteQueryOperator(
        task_id="consume_inbox",
        conn_id="warehouse",
        sql=["DELETE FROM inbox_copy", "INSERT INTO inbox_copy SELECT * FROM inbox", "DELETE FROM inbox"],
    )
    report = check_idempotent(task, DAY, engine=loaded.engine, runs=2, crashes=["during"])
    assert report.targets == {"consume_inbox": ["inbox_copy", "inbox"]}
    rerun, during = report.scenarios
    assert not rerun.ok
    (diff,) = [d for d in rerun.diffs if not d.ok]
    assert diff.table == "inbox_copy" and diff.kinds == ["rows missing"]
    assert [k for k, _ in diff.missing] == [("1",), ("2",), ("3",)]
    assert "rows missing: 3, e.g. msg_id 1, msg_id 2, msg_id 3" in report.text()
    # Killed after the first statement, before the hook's commit: rolled back, and one rerun is right.
    assert during.attempts[0].outcome == "crashed" and "after statement #1" in during.attempts[0].detail
    assert during.ok
    with loaded.engine.connect() as conn:  # restored: the inbox is full again
        assert conn.execute(sa.text("SELECT COUNT(*) FROM inbox")).scalar_one() == 3


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_declared_targets_for_python_tasks(loaded: Any) -> None:
    def append_one(**_: Any) -> None:
        engine = sa.create_engine(loaded.url)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO ledger (entry) VALUES ('payout')"))
        engine.dispose()

    with loaded.engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE ledger (entry TEXT)"))
    task = PythonOperator(task_id="post_ledger", python_callable=append_one)
    with pytest.raises(HarnessError, match="no target tables found"):
        check_idempotent(task, DAY, engine=loaded.engine)
    with pytest.raises(NotIdempotentError, match=r"ledger: 2 rows, the clean run has 1; rows duplicated"):
        assert_idempotent(task, DAY, engine=loaded.engine, targets=["ledger"], runs=2, crashes="none")


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_a_clean_run_that_fails_is_an_error_not_a_verdict(loaded: Any) -> None:
    task = SQLExecuteQueryOperator(task_id="broken", conn_id="warehouse", sql="INSERT INTO nowhere SELECT 1")
    with pytest.raises(HarnessError, match=r"the clean run of broken for window 2026-08-25 failed in broken"):
        check_idempotent(task, DAY, engine=loaded.engine, crashes="none")


@pytest.mark.parametrize("window", ["now", "10:00", ("2026-08-26", "2026-08-25")])
def test_a_window_read_from_the_clock_or_empty_is_refused(window: Any) -> None:
    """The window comes from window.window_of: 'now' or a bare time would make the check read the
    clock (its old copy did: a bare time got today's date), and an empty window holds no data."""
    task = PythonOperator(task_id="noop", python_callable=lambda: None)
    with pytest.raises(HarnessError, match=r"is not an ISO 8601 date or datetime|is not after its start"):
        check_idempotent(task, window, engine="sqlite://", targets=["t"])


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_the_report_labels_the_window_as_the_history_does(loaded: Any) -> None:
    """window.Window.label(), as the history store records it: several days are dates, not instants."""
    task = PythonOperator(task_id="noop", python_callable=lambda: None)
    week = check_idempotent(
        task,
        "2026-08-24",
        width=timedelta(days=7),
        engine=loaded.engine,
        targets=["t"],
        crashes="none",
        runs=1,
    )
    assert week.window == "[2026-08-24, 2026-08-31)"
    day = check_idempotent(task, "2026-08-25", engine=loaded.engine, targets=["t"], crashes="none", runs=1)
    assert day.window == "2026-08-25"


# --- comparison, without a database -------------------------------------------------------------------


def state(rows: list[tuple[Any, ...]], columns: tuple[str, ...] = ("id", "amount")) -> TableState:
    return TableState(
        "t", True, columns, Counter(tuple(None if v is None else str(v) for v in r) for r in rows)
    )


def test_compare_tables_by_key() -> None:
    clean = state([(1, "10.00"), (2, "20.00"), (3, "30.00")])
    after = state([(1, "10.00"), (1, "10.00"), (2, "21.00"), (4, "40.00")])
    diff = compare_tables(clean, after, ["id"])
    assert not diff.ok
    assert diff.duplicated == [(("1",), 2, 1)]
    assert diff.drifted == [(("2",), {"amount": ("20.00", "21.00")})]
    assert diff.missing == [(("3",), 1)]
    assert diff.extra == [(("4",), 1)]
    assert diff.kinds == ["rows duplicated", "rows missing", "rows extra", "values drifting"]
    text = diff.describe()
    assert "rows duplicated: 1 keys (1 extra copies), e.g. id 1 x2 (expected 1 each)" in text
    assert "values drifting: 1 keys, e.g. id 2: amount 20.00 -> 21.00" in text


def test_compare_tables_without_a_key_uses_whole_rows() -> None:
    clean = state([(1, "10.00"), (2, "20.00")])
    same = state([(2, "20.00"), (1, "10.00")])
    assert compare_tables(clean, same).ok
    diff = compare_tables(clean, state([(1, "10.00"), (1, "10.00"), (2, "20.00")]))
    assert diff.key == ("id", "amount") and diff.duplicated == [(("1", "10.00"), 2, 1)]
    assert compare_tables(clean, TableState("t", False)).kinds == ["table missing"]


# --- the pytest plugin --------------------------------------------------------------------------------


PLUGIN_TEST = """
import pytest
import sqlalchemy as sa
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

from airflow_idempotent.testing import NotIdempotentError


@pytest.fixture
def engine():
    engine = sa.create_engine("sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS src"))
        conn.execute(sa.text("DROP TABLE IF EXISTS dst"))
        conn.execute(sa.text("CREATE TABLE src (id INTEGER PRIMARY KEY, day TEXT)"))
        conn.execute(sa.text("CREATE TABLE dst (id INTEGER, day TEXT)"))
        conn.execute(
            sa.text("INSERT INTO src VALUES (1, '2026-05-01'), (2, '2026-05-01'), (3, '2026-05-09')")
        )
    return engine


def copy(task_id, sql):
    return SQLExecuteQueryOperator(task_id=task_id, conn_id="warehouse", sql=sql)


def test_overwrite_passes(idempotency, engine):
    task = copy("overwrite", [
        "DELETE FROM dst WHERE day = '{{{{ ds }}}}'",
        "INSERT INTO dst SELECT id, day FROM src WHERE day = '{{{{ ds }}}}'",
    ])
    report = idempotency.assert_idempotent(task, "2026-05-01", engine=engine)
    assert report.runs == 2 and report.clean["dst"].row_count == 2


def test_append_fails(idempotency, engine):
    task = copy("append", "INSERT INTO dst SELECT id, day FROM src WHERE day = '{{{{ ds }}}}'")
    with pytest.raises(NotIdempotentError, match="rows duplicated"):
        idempotency.assert_idempotent(task, "2026-05-01", engine=engine)
"""


def test_pytest_plugin(tmp_path: Path) -> None:
    db = tmp_path / "plugin.db"
    (tmp_path / "test_with_plugin.py").write_text(PLUGIN_TEST.format(db=db))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # load exactly this plugin, whether installed or not
        "AIRFLOW_CONN_WAREHOUSE": f'{{"conn_type": "sqlite", "host": "{db}"}}',
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "airflow_idempotent.testing.pytest_plugin",
            "-p",
            "no:cacheprovider",
            "--idem-runs",
            "2",
            "--idem-crashes",
            "before,after_commit",
            str(tmp_path / "test_with_plugin.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "airflow_idempotent.testing.pytest_plugin",
            "--idem-crashes",
            "soon",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 4 and "--idem-crashes 'soon'" in bad.stderr

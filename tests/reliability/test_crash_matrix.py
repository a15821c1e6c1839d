"""Crash matrix: SIGKILL the task at every step of every strategy on every database, rerun, compare.

For overwrite, merge and the guarded swap, on PostgreSQL, MariaDB, SQLite and DuckDB, the
idempotency harness (`airflow_idempotent.testing.check_idempotent`) runs the write once cleanly
from a damaged starting state, then, for each crash point, restores that state, kills one
attempt there with SIGKILL (in a forked child: no `finally`, no rollback but the database's) and
reruns the window three times. The target table (the whole of it: the window and its
neighbours) must then equal the clean run's, row for row; the history store must hold one write
record per attempt that completed; nothing else.

Crash points (the write statements are counted as the harness counts them: DELETE, INSERT):

- overwrite: before the write; between DELETE and INSERT; mid-INSERT at a random sale_id; after
  the INSERT before commit; after commit before the history record.
- merge (delete_missing): before the write; between the DELETE of vanished keys and the upsert;
  mid-upsert at a random sale_id; after the upsert before commit; after commit before history.
- guarded swap (a guarded DAG with always_stage, i.e. stage, diff, swap): before the write;
  mid-INSERT into the staging table at a random sale_id; after staging before the swap; mid-swap
  (between the window's DELETE and the INSERT from staging); before commit; after commit before
  the history record.
- random: per database and strategy, two scenarios of three attempts that each crash with
  probability 2/3 at a point drawn from that list, then a final attempt; seeded and recorded.

"Mid-INSERT at a random row": see tests/reliability/probe.py. The job's SELECT calls
`idem_probe(s.sale_id)`; when sale_id N (drawn from the seed) is read during the INSERT the process is
killed from inside SQLite/DuckDB, or, on PostgreSQL/MariaDB, the server sleeps there and a
watcher thread of the task process SIGKILLs the process while the server is inside the INSERT.

The harness is used as it is, with two additions injected from here (no change to the product):
its scenario planner (`scenarios.plan`) is replaced by this matrix, and its crash installer
(`attempt.install_crash`) learns the two points it has no name for (mid-INSERT at a row; after the
commit of a guarded write, which does not go through `write()`).

Effects: the payment (HTTP with Idempotency-Key and lookup) and the file delivery, with the
ledger on SQLite, PostgreSQL and MariaDB, killed before the claim, after the claim, after the
call and after the ledger's commit, then rerun three times against the loopback peers of
tests/peers.py: the outside world must have seen exactly one effect.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa
from airflow.sdk import DAG
from sqlalchemy.pool import NullPool

from airflow_idempotent.effects import FileDeliveryEffect, Ledger, perform
from airflow_idempotent.examples.payouts import create_payouts, create_sales, simulate_crash
from airflow_idempotent.guard import GuardConfig, Thresholds
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator
from airflow_idempotent.operators.base import WindowWriteOperator
from airflow_idempotent.testing import Crash, ScenarioResult, attempt, check_idempotent, harness, scenarios
from airflow_idempotent.testing.scenarios import Scenario
from airflow_idempotent.window import window_of
from tests.conftest import (
    MARIADB_HOST,
    MARIADB_PORT,
    MARIADB_USER,
    PG_HOST,
    PG_PORT,
    PG_USER,
    _admin_engine,
    _conn_json,
    _fresh_name,
)
from tests.peers import HttpPeer
from tests.reliability import probe
from tests.reliability.conftest import Recorder

DAY = date(2026, 8, 25)
FIRST_SALE, LAST_SALE = 48001, 50000  # sale_id = i, 2,000 a day from 2026-08-01
STALE_KEYS = (990001, 990002, 990003)  # in the window, not in the source: a rerun must remove them
RERUNS = 3
RANDOM_SCENARIOS = 2
#: On PostgreSQL/MariaDB the probe sleeps this long at row N while the watcher kills the client.
SERVER_SLEEP = 1.0
STRATEGIES = ("overwrite", "merge", "guarded_swap")


@dataclass(frozen=True)
class MatrixCrash(Crash):
    """A crash the harness has no name for: mid-INSERT at a row, or after a guarded commit."""

    kind: str = "mid_insert"
    row: int = 0

    def label(self) -> str:
        if self.kind == "mid_insert":
            return f"mid-INSERT at sale_id {self.row}"
        return "after commit (guarded), before the history record"


def points(strategy: str, rng: random.Random) -> dict[str, Crash]:
    """The named crash points of `strategy`, in the order they strike; rows drawn from `rng`."""
    mid = MatrixCrash("during", kind="mid_insert", row=rng.randint(FIRST_SALE, LAST_SALE))
    if strategy == "guarded_swap":
        return {
            "before_write": Crash("before"),
            "mid_insert_staging": mid,
            "staged_before_swap": Crash("during", 1),
            "mid_swap_after_delete": Crash("during", 2),
            "before_commit": Crash("during", 3),
            "after_commit_before_history": MatrixCrash("after_commit", kind="after_commit"),
        }
    return {
        "before_write": Crash("before"),
        "between_delete_and_insert": Crash("during", 1),
        "mid_insert": mid,
        "before_commit": Crash("during", 2),
        "after_commit_before_history": Crash("after_commit"),
    }


# --------------------------------------------------------------------------------------------
# The harness, extended from here
# --------------------------------------------------------------------------------------------


def _matrix_installer(real: Callable[..., Any]) -> Callable[..., Any]:
    """attempt.install_crash plus MatrixCrash (runs in the forked child)."""

    def install(task: Any, crash: Crash, channel: int) -> Callable[[str], None]:
        if isinstance(crash, MatrixCrash) and crash.kind == "mid_insert":
            sleep = SERVER_SLEEP

            def kill() -> None:
                attempt.die(channel, crash, f"mid-INSERT, the SELECT at sale_id {crash.row}")

            probe.arm_inserts(crash.row, sleep, kill)
            return lambda phase: None
        if isinstance(crash, MatrixCrash):
            import airflow_idempotent.guard.write as staging

            real_write = staging.guarded_write

            def guarded_write(*args: Any, **kwargs: Any) -> Any:
                result = real_write(*args, **kwargs)
                attempt.die(channel, crash, "guarded write committed, before the history record")
                return result

            staging.guarded_write = guarded_write  # type: ignore[assignment]
            return lambda phase: None
        installed: Callable[[str], None] = real(task, crash, channel)
        return installed

    return install


@pytest.fixture
def matrix_harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Swap in this module's planner and crash installer for one test."""
    plan: dict[str, Any] = {}

    def planner(*args: Any, **kwargs: Any) -> tuple[list[Any], list[str], int | None]:
        return plan["scenarios"], [], plan["seed"]

    monkeypatch.setattr(scenarios, "plan", planner)
    monkeypatch.setattr(attempt, "install_crash", _matrix_installer(attempt.install_crash))
    yield plan


# --------------------------------------------------------------------------------------------
# The job, the starting state, the figures
# --------------------------------------------------------------------------------------------


def make_task(strategy: str) -> WindowWriteOperator:
    common: dict[str, Any] = {
        "task_id": "write",
        "conn_id": "warehouse",
        "table": "payouts",
        "partition_column": "sale_date",
        "sql": probe.PROBE_SQL,
        "parameters": {"policy_version": "v1"},
        "granularity": "day",
    }
    if strategy == "merge":
        return MergeOperator(key_columns=["sale_id"], delete_missing=True, **common)
    if strategy == "overwrite":
        return PartitionOverwriteOperator(**common)
    guard = GuardConfig(always_stage=True, measures=["amount_eur"], thresholds=Thresholds(max_shrink=None))
    with DAG(
        "reliability_guarded_swap",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1),
        params=guard.param(),
    ):
        return PartitionOverwriteOperator(key_columns=["sale_id"], **common)


def damaged_start(engine: sa.Engine) -> None:
    """Sales, the empty target, the probe; then the damaged state (`reset`)."""
    create_sales(engine)
    create_payouts(engine)
    probe.install(engine)
    reset(engine)


def reset(engine: sa.Engine) -> None:
    """Neighbours written; the window half-written by a crashed append (1,247 of 2,000 rows) plus
    three stale keys. Set-based, so the harness restores it before each scenario in one statement."""
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM payouts"))
    for day in (DAY - timedelta(days=1), DAY + timedelta(days=1)):
        simulate_crash(engine, day, rows=2000)
    simulate_crash(engine, DAY, rows=1247)
    stale_day: Any = DAY.isoformat() if engine.dialect.name == "sqlite" else DAY
    with engine.begin() as conn:
        for key in STALE_KEYS:
            conn.execute(
                sa.text(
                    "INSERT INTO payouts (sale_id, sale_date, amount_eur, rate) VALUES (:k, :d, 1.00, 0.60)"
                ),
                {"k": key, "d": stale_day},
            )
    engine.dispose()  # no pooled connection (or DuckDB file handle) crosses the harness's fork


def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    """A fresh history store (SQLite file) for this test, migrated here so the children do not."""
    path = tmp_path / "history.db"
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    store = HistoryStore(sa.create_engine(sa.URL.create("sqlite", database=str(path)), poolclass=NullPool))
    store.migrate()
    return store


def figures(result: ScenarioResult) -> dict[str, int]:
    lost = duplicated = extra = drifted = 0
    for diff in result.diffs:
        lost += sum(n for _, n in diff.missing)
        duplicated += sum(actual - expected for _, actual, expected in diff.duplicated)
        extra += sum(n for _, n in diff.extra)
        drifted += len(diff.drifted)
    return {"rows_lost": lost, "duplicates": duplicated, "extra_rows": extra, "drifted_rows": drifted}


def window_rows(result: ScenarioResult) -> int:
    state = result.diffs[0].actual
    column = state.columns.index("sale_date")
    return sum(n for row, n in state.rows.items() if (row[column] or "")[:10] == DAY.isoformat())


def judge(result: ScenarioResult, store: HistoryStore, run_id: str) -> tuple[str, dict[str, Any]]:
    """The outcome of one scenario, and what was measured."""
    planned = [a for a in result.attempts if a.crash is not None]
    not_reached = [a for a in planned if a.outcome != "crashed"]
    failed = [a for a in result.attempts if a.outcome == "failed"]
    completed = [a for a in result.attempts if a.outcome.startswith("completed")]
    writes = store.writes(run_id=run_id, status="written")
    ordinals = [w["ordinal"] for w in writes]
    final_rows = window_rows(result)
    history_complete = (
        len(writes) == len(completed)
        and ordinals == sorted(set(ordinals))
        and bool(writes)
        and writes[-1]["row_count"] == final_rows
    )
    measured = {
        "attempts": [a.outcome for a in result.attempts],
        "crashes": [a.detail for a in planned],
        "seconds": round(sum(a.seconds for a in result.attempts), 2),
        "history_writes": len(writes),
        "history_complete": history_complete,
        "window_rows": final_rows,
        "failures": [a.detail[:300] for a in failed],
        **figures(result),
    }
    if failed:
        return "attempt_failed", measured
    if not_reached:
        return "crash_not_reached", measured
    if not result.ok:
        return "broken", measured
    if not history_complete:
        return "history_incomplete", measured
    return "ok", measured


# --------------------------------------------------------------------------------------------
# The matrix
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_crash_matrix(
    warehouse: Any,
    strategy: str,
    matrix_harness: dict[str, Any],
    reliability: Recorder,
    reliability_seed: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    damaged_start(warehouse.engine)
    store = history(tmp_path, monkeypatch)
    task = make_task(strategy)
    rng = random.Random(f"{reliability_seed}:{warehouse.kind}:{strategy}")
    named = points(strategy, rng)
    planned: list[Scenario] = []
    meta: dict[str, dict[str, Any]] = {}
    for i, (point, crash) in enumerate(named.items(), start=1):
        name = f"f{i} {point}: crash, then run x{RERUNS}"
        planned.append(Scenario(name, ((task.task_id, crash), *([None] * RERUNS)), task.task_id))
        meta[name] = {"crash_point": point, "reruns": RERUNS, "row": getattr(crash, "row", None) or None}
    for i in range(1, RANDOM_SCENARIOS + 1):
        choice = random.Random(f"{reliability_seed}:{warehouse.kind}:{strategy}:random{i}")
        attempts: list[tuple[str, Crash] | None] = []
        labels: list[str] = []
        for _ in range(RERUNS):
            if choice.random() < 2 / 3:
                point, crash = choice.choice(list(points(strategy, choice).items()))
                attempts.append((task.task_id, crash))
                labels.append(
                    point if not isinstance(crash, MatrixCrash) or not crash.row else f"{point}@{crash.row}"
                )
            else:
                attempts.append(None)
                labels.append("completes")
        attempts.append(None)
        name = f"r{i} " + ", ".join(labels) + ", completes"
        planned.append(Scenario(name, tuple(attempts), task.task_id))
        meta[name] = {"crash_point": "random: " + ", ".join(labels), "reruns": RERUNS, "row": None}
    matrix_harness.update(scenarios=planned, seed=reliability_seed)

    report = check_idempotent(
        task,
        DAY,
        engine=warehouse.engine,
        runs=RERUNS + 1,
        timeout=120,
        reset=lambda: reset(warehouse.engine),
        restore=False,
        history="keep",  # judged below on what history recorded of every crash and rerun
    )

    broken: list[str] = []
    for result in report.scenarios:
        info = meta[result.name]
        run_id = harness.run_id(result.name, window_of(DAY))
        outcome, measured = judge(result, store, run_id)
        reliability.record(
            suite="crash",
            case=f"crash/{warehouse.kind}/{strategy}/{info['crash_point']}",
            database=warehouse.kind,
            strategy=strategy,
            crash_point=info["crash_point"],
            reruns=info["reruns"],
            rows_lost=measured.pop("rows_lost"),
            duplicates=measured.pop("duplicates"),
            outcome=outcome,
            kill_row=info["row"],
            clean_rows=report.clean["payouts"].row_count,
            **measured,
        )
        if outcome != "ok":
            broken.append(f"{result.name}: {outcome} {measured}")
    assert not broken, report.text() + "\n" + "\n".join(broken)


# --------------------------------------------------------------------------------------------
# Effects: the outside world sees one effect
# --------------------------------------------------------------------------------------------

EFFECT_POINTS = ("before_claim", "after_claim", "after_call", "after_commit")


@pytest.fixture(scope="module")
def ledger_servers() -> Iterator[dict[str, str]]:
    """Fresh PostgreSQL and MariaDB databases for the ledger, dropped at the end."""
    urls: dict[str, str] = {}
    admins: list[tuple[sa.Engine, str, str]] = []
    pg = _admin_engine(
        "postgres", f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres?connect_timeout=5"
    )
    maria = _admin_engine(
        "mariadb", f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/?connect_timeout=5"
    )
    pg_db, maria_db = _fresh_name(), _fresh_name()
    with pg.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{pg_db}"'))
    admins.append((pg, pg_db, f'DROP DATABASE IF EXISTS "{pg_db}" WITH (FORCE)'))
    with maria.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE `{maria_db}` CHARACTER SET utf8mb4"))
    admins.append((maria, maria_db, f"DROP DATABASE IF EXISTS `{maria_db}`"))
    urls["postgres"] = f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{pg_db}"
    urls["mariadb"] = f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/{maria_db}"
    try:
        yield urls
    finally:
        for admin, _, drop in admins:
            with admin.connect() as conn:
                conn.execute(sa.text(drop))
            admin.dispose()


@pytest.mark.parametrize("point", EFFECT_POINTS)
@pytest.mark.parametrize("effect_kind", ["http_payment", "file_delivery"])
@pytest.mark.parametrize("ledger_db", ["sqlite", "postgres", "mariadb"])
def test_effects_once_through_a_crash_and_three_reruns(
    ledger_db: str,
    effect_kind: str,
    point: str,
    ledger_servers: dict[str, str],
    reliability: Recorder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.test_effects import _crash, ctx, http_effect

    if ledger_db == "sqlite":
        path = tmp_path / "history.db"
        url = f"sqlite:///{path}"
        conn = json.dumps({"conn_type": "sqlite", "host": str(path)})
    else:
        url = ledger_servers[ledger_db]
        conn = _conn_json(ledger_db, url)
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", conn)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    ledger = Ledger(sa.create_engine(url, poolclass=NullPool))
    ledger.migrate()
    with ledger.engine.begin() as c:
        c.execute(sa.text("DELETE FROM idem_effect_event"))
        c.execute(sa.text("DELETE FROM idem_effect"))
    outbox = tmp_path / "outbox"
    payload = b"# payouts bank file;window_start=2026-08-25\nsale_id\n48001\n"
    with HttpPeer() as peer:
        effect: Any = (
            http_effect(peer)
            if effect_kind == "http_payment"
            else FileDeliveryEffect("bank-file", outbox, "payouts-2026-08-25.csv", payload)
        )
        dest = outbox / "payouts-2026-08-25.csv"
        _crash(point, effect, url)
        writes: set[tuple[int, int]] = set()
        statuses: list[str] = []
        for n in range(2, 2 + RERUNS):
            statuses.append(perform(effect, context=ctx(n), granularity="day", ledger=ledger, wait=5).status)
            if dest.exists():
                writes.add((dest.stat().st_ino, dest.stat().st_mtime_ns))
        if effect_kind == "http_payment":
            seen, requests = peer.effects, len(peer.posts)
        else:
            seen, requests = len(writes), len(writes)
            if dest.exists() and dest.read_bytes() != payload:
                seen = -1
    entries = ledger.entries()
    ledger.engine.dispose()
    ok = seen == 1 and requests == 1 and len(entries) == 1 and entries[0].state == "done"
    reliability.record(
        suite="effects",
        case=f"effects/{ledger_db}/{effect_kind}/{point}",
        database=ledger_db,
        strategy=effect_kind,
        crash_point=point,
        reruns=RERUNS,
        rows_lost=None,
        duplicates=max(0, seen - 1),
        outcome="ok" if ok else "broken",
        effects_seen=seen,
        requests=requests,
        statuses=statuses,
        ledger_state=[e.state for e in entries],
    )
    assert ok, (seen, requests, statuses, [e.state for e in entries])


# --------------------------------------------------------------------------------------------
# Control: the same instrument on a job that is not idempotent must show the damage
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("warehouse", ["sqlite", "postgres"], indirect=True)
def test_control_the_matrix_catches_a_naive_append(warehouse: Any, reliability: Recorder) -> None:
    """A plain INSERT ... SELECT (the contrast DAG's task) through the same harness: a crash, then
    three reruns. It must come out broken, with the duplicates counted; recorded as a control."""
    from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

    damaged_start(warehouse.engine)
    create_payouts(warehouse.engine, table="payouts_naive", keyed=False)
    warehouse.engine.dispose()
    naive = SQLExecuteQueryOperator(
        task_id="append_payouts",
        conn_id="warehouse",
        sql=(
            "INSERT INTO payouts_naive (sale_id, sale_date, amount_eur, rate) "
            "SELECT s.sale_id, s.sale_date, ROUND(s.price_eur * 0.60, 2), 0.60 FROM sales s "
            "WHERE s.sale_date = '2026-08-25'"
        ),
    )
    report = check_idempotent(
        naive, DAY, engine=warehouse.engine, runs=RERUNS + 1, crashes=["before", "after_commit"]
    )
    for result in report.scenarios:
        measured = figures(result)
        reliability.record(
            suite="control",
            case=f"control/{warehouse.kind}/naive_append/{result.name}",
            database=warehouse.kind,
            strategy="naive_append",
            crash_point=result.name,
            reruns=RERUNS,
            rows_lost=measured.pop("rows_lost"),
            duplicates=measured.pop("duplicates"),
            outcome="detected" if not result.ok else "not_detected",
            **measured,
        )
    assert not report.ok and all(not s.ok for s in report.scenarios), report.text()

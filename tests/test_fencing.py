"""Fencing: two attempts of one task instance at once, the older one reaching its commit last.

Try 1 (payout policy v1) and try 2 (policy v2, the corrected rule) of the same task instance run
in two forked processes on every warehouse. Try 1 is held back where a zombie or a duplicate
dispatch would stall it: after it started writing (its fence taken) and before it takes the
(table, window) lock (`before_lock`: try 2 commits first, then try 1 writes its whole window and
reaches its commit last), or inside its transaction just before commit, holding the lock
(`before_commit`: try 2 started and waits on the lock). Either way the window must hold try 2's
v2 result (figures from the scenario's formula, in pure Python) and history must show try 1
`fenced`, naming try 2. The history store is a fresh SQLite file both processes share.
"""

# ruff: noqa: F811  (the fixtures imported from other test modules are parameters here)
from __future__ import annotations

import multiprocessing
import queue
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from airflow.sdk.exceptions import AirflowFailException

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.errors import FencedError
from airflow_idempotent.examples.payouts import window_totals
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.history.fences import AttemptFence, holder, take
from airflow_idempotent.history.report import window_history
from airflow_idempotent.identity import AttemptIdentity
from airflow_idempotent.operators.base import WindowWriteOperator
from airflow_idempotent.window import Window
from tests.test_guard_operator import history  # noqa: F401  (fixture)
from tests.test_operators import DAY, context, day_truth, loaded, make  # noqa: F401  (fixture)

FORK = multiprocessing.get_context("fork")
#: Seconds a step may take before the test calls it hung.
WAIT = 60.0
TARGET = "warehouse:payouts"


class TI:
    """The task instance fields an attempt's identity is read from: one task instance, two tries."""

    def __init__(self, try_number: int) -> None:
        self.dag_id = "payouts_daily"
        self.run_id = "scheduled__2026-08-25T00:00:00+00:00"
        self.task_id = "write"
        self.map_index = -1
        self.try_number = try_number


def attempt_context(try_number: int) -> dict[str, Any]:
    ti = TI(try_number)
    return context(ti=ti, task_instance=ti, run_id=ti.run_id)


def operator(strategy: str, policy: str) -> WindowWriteOperator:
    return make(strategy, task_id="write", parameters={"policy_version": policy})


def hold_before_lock(holding: Any, release: Any) -> None:
    """In try 1's child: stop before the warehouse's (table, window) lock, fence already taken."""
    real = EngineAdapter.locked_transaction

    @contextmanager
    def held(self: EngineAdapter, table: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if table == "payouts":  # the warehouse's lock, not the history store's
            holding.set()
            release.wait(WAIT)
        with real(self, table, *args, **kwargs) as conn:
            yield conn

    EngineAdapter.locked_transaction = held  # type: ignore[method-assign]


def hold_before_commit(holding: Any, release: Any) -> None:
    """In try 1's child: stop at the last check before commit, inside the transaction, lock held."""
    real = AttemptFence.check

    def held(self: AttemptFence) -> None:
        holding.set()
        release.wait(WAIT)
        real(self)

    AttemptFence.check = held  # type: ignore[method-assign]


HOLDS: dict[str, Callable[[Any, Any], None]] = {
    "before_lock": hold_before_lock,
    "before_commit": hold_before_commit,
}


def attempt(
    try_number: int, strategy: str, policy: str, hold: str | None, holding: Any, release: Any, out: Any
) -> None:
    """One attempt in its own process; reports (try, status, error, fails without retry)."""
    if hold is not None:
        HOLDS[hold](holding, release)
    try:
        operator(strategy, policy).execute(attempt_context(try_number))  # type: ignore[arg-type]
        out.put((try_number, "ok", "", False))
    except BaseException as err:  # reported to the test, which asserts on it
        out.put((try_number, "error", f"{type(err).__name__}: {err}", isinstance(err, AirflowFailException)))


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("warehouse", "strategy"),
    [
        ("postgres", "overwrite"),
        ("postgres", "merge"),
        ("mariadb", "overwrite"),
        ("sqlite", "overwrite"),
        ("duckdb", "overwrite"),
    ],
    indirect=["warehouse"],
)
@pytest.mark.parametrize("hold", ["before_lock", "before_commit"])
def test_the_older_attempt_reaching_its_commit_last_is_fenced(
    loaded: Any, history: HistoryStore, strategy: str, hold: str
) -> None:
    v1, v2 = day_truth(DAY, "v1"), day_truth(DAY, "v2")
    assert v1 != v2  # the two policies give different windows, so the test can tell them apart
    holding, release, out = FORK.Event(), FORK.Event(), FORK.Queue()
    loaded.engine.dispose()  # DuckDB: one process at a time holds the file; the children write it
    first = FORK.Process(target=attempt, args=(1, strategy, "v1", hold, holding, release, out))
    second = FORK.Process(target=attempt, args=(2, strategy, "v2", None, holding, release, out))
    first.start()
    try:
        assert holding.wait(WAIT), "try 1 never reached its hold point"
        second.start()
        identity = AttemptIdentity.from_context(attempt_context(2), operator(strategy, "v2"))
        window = operator(strategy, "v2").window(context())
        if hold == "before_lock":  # try 2 writes and commits first
            second.join(WAIT)
            assert second.exitcode == 0
        else:  # try 2 started writing (its fence is up) and now waits on try 1's lock
            wait_for(lambda: holder(history, identity, TARGET, window) == 2, "try 2's fence")
        release.set()
        reports = {}
        for _ in range(2):
            try_number, status, error, no_retry = out.get(timeout=WAIT)
            reports[try_number] = (status, error, no_retry)
    finally:
        release.set()
        for process in (first, second):
            process.join(WAIT)
            if process.is_alive():
                process.kill()
    loaded.engine.dispose()  # read the file as the children left it
    assert window_totals(loaded.engine, "payouts", DAY) == v2  # without the fence: v1, try 1's
    assert reports[2] == ("ok", "", False), reports
    status, error, no_retry = reports[1]
    assert status == "error" and error.startswith("FencedError: fenced: try 1 of payouts_daily.write")
    assert "try 2, which started writing at" in error and "clear the task" in error
    assert no_retry  # an AirflowFailException: Airflow does not retry a fenced attempt
    writes = {w["try_number"]: w for w in history.writes(target=TARGET)}
    assert set(writes) == {1, 2}
    assert writes[2]["status"] == "written" and writes[2]["policy_version"] == "v2"
    assert writes[2]["row_count"] == v2[0]
    assert writes[1]["status"] == "fenced" and writes[1]["policy_version"] == "v1"
    assert "try 2, which started writing at" in writes[1]["message"]
    assert writes[1]["row_count"] is None  # it wrote nothing
    assert holder(history, identity, TARGET, window) == 2


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_an_older_attempt_starting_after_a_newer_one_is_fenced_before_writing(
    loaded: Any, history: HistoryStore
) -> None:
    """A zombie that wakes after its retry finished: refused when it takes its fence."""
    operator("overwrite", "v2").execute(attempt_context(2))  # type: ignore[arg-type]
    out: Any = queue.Queue()
    attempt(1, "overwrite", "v1", None, None, None, out)
    _, status, error, no_retry = out.get_nowait()
    assert status == "error" and "FencedError: fenced: try 1" in error and no_retry
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")
    # a newer try raises the fence and writes
    operator("overwrite", "v1").execute(attempt_context(3))  # type: ignore[arg-type]
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v1")
    statuses = [(w["try_number"], w["status"]) for w in history.writes(target=TARGET)]
    assert statuses == [(2, "written"), (1, "fenced"), (3, "written")]
    (shown,) = window_history(history)  # what `airflow-idempotent history` (and --json, the UI) show
    assert shown["flags"] == ["fenced"]
    assert [w["flags"] for w in shown["writes"]] == [[], ["fenced"], []]


def race_take(url: str, run_id: str, try_number: int, start: Any, out: Any) -> None:
    """One attempt's take, in its own process, released with the others at once."""
    store = HistoryStore(sa.create_engine(url))
    identity = AttemptIdentity("payouts_daily", run_id, "write", -1, try_number, "scheduled")
    try:
        start.wait(WAIT)
        take(store, identity, TARGET, [RACE_WINDOW])
        out.put((try_number, "ok"))
    except FencedError as err:
        out.put((try_number, f"fenced by {str(err).split('instance, ')[1].split(',')[0]}"))
    except BaseException as err:  # reported to the test, which asserts on it
        out.put((try_number, f"error {type(err).__name__}: {err}"))
    finally:
        store.engine.dispose()


RACE_WINDOW = Window(
    start=datetime(2026, 8, 25, tzinfo=timezone.utc),
    end=datetime(2026, 8, 26, tzinfo=timezone.utc),
    source="test",
)
#: The tries of one task instance taking one window's fence at once (a duplicate dispatch of try 6 too).
RACE_TRIES = (1, 2, 3, 4, 5, 6, 6)


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "mariadb"])
def test_attempts_taking_one_fence_at_once_leave_it_with_the_newest(
    kind: str, request: pytest.FixtureRequest, tmp_path: Any
) -> None:
    """No lock but the fence's unique key: one row per fence, the newest try holds it, it is never
    fenced, and each older try is fenced by a newer one or got there first (rounds of 7 processes)."""
    fixture = {"postgres": "pg_url", "mariadb": "mariadb_url"}
    url = (
        request.getfixturevalue(fixture[kind]) if kind in fixture else f"sqlite:///{tmp_path / 'history.db'}"
    )
    store = HistoryStore(sa.create_engine(url))
    store.migrate()
    store.engine.dispose()
    for round_ in range(4):
        run_id = f"race__{round_}__{uuid.uuid4().hex[:8]}"
        start, out = FORK.Barrier(len(RACE_TRIES)), FORK.Queue()
        procs = [FORK.Process(target=race_take, args=(url, run_id, t, start, out)) for t in RACE_TRIES]
        for proc in procs:
            proc.start()
        results = sorted(out.get(timeout=WAIT) for _ in procs)
        for proc in procs:
            proc.join(WAIT)
        assert [t for t, _ in results] == sorted(RACE_TRIES)
        assert not [r for r in results if r[1].startswith("error")], results
        assert [r for r in results if r[0] == max(RACE_TRIES)] == [(6, "ok"), (6, "ok")]
        for try_number, outcome in results:  # fenced only ever by a newer try
            if outcome != "ok":
                assert int(outcome.removeprefix("fenced by try ")) > try_number, results
        identity = AttemptIdentity("payouts_daily", run_id, "write", -1, 6, "scheduled")
        assert holder(store, identity, TARGET, RACE_WINDOW) == max(RACE_TRIES)
        with store.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT COUNT(*) FROM idem_fence WHERE run_id = :r"), {"r": run_id})
            assert rows.scalar() == 1
    store.engine.dispose()

"""Asset events only for windows whose content changed (emit_asset="changed", the default).

The operators run through their own API on every engine; whether Airflow registers an event is
what the task's outlets hold when the attempt succeeds (the task runner sends `ti.task.outlets`)
plus the outlet events the task filled, so both are checked. Whether a window changed is known
here independently of the code: the scenario's v1 and v2 payouts of the day differ (their totals
from the formula), a rerun under the same policy reproduces the same rows. Real DAG runs and a
real scheduler: test_code_identity.py and tests/e2e/test_changed_events.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_idempotent.examples.payouts import create_payouts, create_sales
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.operators.assets import emit_mode, target_asset
from tests.test_operators import DAY, context, day_truth, make

ASSET = target_asset("warehouse", "payouts")


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    path = tmp_path / "history.db"
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    return HistoryStore(sa.create_engine(f"sqlite:///{path}"))


@pytest.fixture
def loaded(warehouse: Any) -> Any:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    return warehouse


def attempt(op: Any, policy: str = "v1", n: int = 1) -> tuple[dict[str, Any], bool, dict[str, Any] | None]:
    """One attempt: its XCom, whether Airflow would register an event of the target (the asset is
    in the task's outlets at success), and the event's extra if the task filled one."""
    events = OutletEventAccessors()
    out = op.execute(context(outlet_events=events, run_id=f"manual__{policy}_{n}"))
    extra = dict(events[ASSET].extra) if ASSET in list(events) else None
    return out, ASSET in op.outlets, extra


def test_the_figures_say_v2_changes_the_day() -> None:
    assert day_truth(DAY, "v1") != day_truth(DAY, "v2")


@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_an_event_only_when_the_windows_content_changed(
    loaded: Any, history: HistoryStore, strategy: str
) -> None:
    first, emitted, extra = attempt(make(strategy))
    assert (first["changed"], emitted) == (True, True)  # a first write
    assert extra is not None and extra["dataset_version"] == 1 and extra["window"] == "2026-08-25"

    again, emitted, extra = attempt(make(strategy), n=2)  # same rows again
    assert (again["changed"], again["dataset_version"], again["ordinal"]) == (False, 1, 2)
    assert (emitted, extra) == (False, None)

    v2 = make(strategy, parameters={"policy_version": "v2"})
    changed, emitted, extra = attempt(v2, "v2")  # a corrective change: the day's payouts differ
    assert (changed["changed"], changed["dataset_version"]) == (True, 2)
    assert emitted and extra is not None and extra["dataset_version"] == 2
    assert [w["status"] for w in history.writes(target="warehouse:payouts")] == ["written"] * 3


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_always_keeps_an_event_for_every_write(loaded: Any, history: HistoryStore) -> None:
    attempt(make("overwrite", emit_asset="always"))
    out, emitted, extra = attempt(make("overwrite", emit_asset="always"), n=2)
    assert out["changed"] is False and emitted and extra is not None and extra["dataset_version"] == 1


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_a_skip_emits_nothing_unless_always(loaded: Any, history: HistoryStore) -> None:
    attempt(make("overwrite", skip_if_unchanged=True))
    out, emitted, extra = attempt(make("overwrite", skip_if_unchanged=True), n=2)
    assert out["skipped"] and (emitted, extra) == (False, None)
    out, emitted, _ = attempt(make("overwrite", skip_if_unchanged=True, emit_asset="always"), n=3)
    assert out["skipped"] and emitted  # today's behaviour: the declared outlet's event


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_without_history_nothing_says_unchanged_so_it_emits(loaded: Any, tmp_path: Path) -> None:
    attempt(make("overwrite", record_history=False))
    _, emitted, extra = attempt(make("overwrite", record_history=False), n=2)
    assert emitted and extra is not None


def test_emit_asset_values() -> None:
    assert (emit_mode(True), emit_mode(False), emit_mode("always")) == ("changed", None, "always")
    with pytest.raises(ValueError, match=r"'changed'.*'always'"):
        make("overwrite", emit_asset="sometimes")
    assert ASSET not in make("overwrite", emit_asset=False).outlets
    assert ASSET in make("overwrite").outlets  # declared: the scheduler knows the dependency


@pytest.mark.parametrize("warehouse", ["sqlite", "postgres"], indirect=True)
def test_a_lookback_event_names_only_the_periods_it_changed(warehouse: Any, history: HistoryStore) -> None:
    """Day 24 written, a late sale of the 24th arrives, day 25 runs with lookback=1: the 24th
    changed (its 501st row), the 25th is new; a rerun of the 25th with lookback changes nothing."""
    from tests.test_lookback import FIRST, PER_DAY, TODAY, YESTERDAY, late_row, run

    create_sales(warehouse.engine, days=3, per_day=PER_DAY, start=FIRST)
    create_payouts(warehouse.engine)

    def go(day: Any, n: int, lookback: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
        op, events = make("overwrite", lookback=lookback), OutletEventAccessors()
        out = op.execute({**run(day, n), "outlet_events": events})
        return out, dict(events[ASSET].extra) if ASSET in op.outlets else None

    go(YESTERDAY, 1, 0)
    go(TODAY, 1, 1)  # first write of the 25th, the 24th unchanged
    late_row(warehouse.engine)
    out, extra = go(TODAY, 2, 1)
    assert [p["changed"] for p in out["periods"]] == [True, False]  # the late row; the same 25th
    assert extra is not None and extra["periods"] == ["2026-08-24"]
    out, extra = go(TODAY, 3, 1)
    assert [p["changed"] for p in out["periods"]] == [False, False] and extra is None

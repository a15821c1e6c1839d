"""The guard inside the task: declared semantics, stage-diff-swap, stop conditions, kill switch.

Operators run through their own API inside a real DAG object that declares the guard, with a
backfill run's context; the warehouse is real (all four databases), the history store a fresh
SQLite file per test. Expected figures come from the scenario's formula in pure Python.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa
from airflow.sdk import DAG

from airflow_idempotent.examples.payouts import (
    PAYOUT_SQL,
    create_payouts,
    create_sales,
    table_checksum,
    window_totals,
)
from airflow_idempotent.guard import GuardConfig, GuardRefusal, Thresholds, killswitch
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.history.store import BackfillSizeRecord
from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator
from airflow_idempotent.operators.base import WindowWriteOperator
from tests.test_operators import START, amount, context, day_truth

DAY = date(2026, 8, 19)


class Run:
    """The bits of a DagRun the operator reads: run type and conf."""

    def __init__(self, run_type: str, conf: dict[str, Any] | None = None) -> None:
        self.run_type = run_type
        self.conf = conf or {}


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


def guarded(
    strategy: str = "overwrite", guard: GuardConfig | None = None, **kwargs: Any
) -> WindowWriteOperator:
    guard = guard or GuardConfig(cap=31, measures=["amount_eur"])
    dag = DAG(
        dag_id=f"guarded_{strategy}",
        schedule="@daily",
        start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
        params={"policy_version": "v1", **guard.param()},
    )
    common: dict[str, Any] = {
        "task_id": "write",
        "dag": dag,
        "table": "payouts",
        "partition_column": "sale_date",
        "key_columns": ["sale_id"],
        "sql": PAYOUT_SQL,
        "parameters": {"policy_version": kwargs.pop("policy", "v1")},
        "granularity": "day",
    }
    common.update(kwargs)
    cls = MergeOperator if strategy == "merge" else PartitionOverwriteOperator
    return cls(**common)


def backfill(day: date, n: int, windows: int | None = 1, **conf: Any) -> dict[str, Any]:
    """A backfill run's context, its backfill's size recorded as the scheduler's listener records
    it (`windows` None: nothing recorded, a backfill the scheduler never saw start)."""
    run_id = f"backfill__{day}_{n}"
    if windows is not None:
        for strategy in ("overwrite", "merge"):
            record_size(f"guarded_{strategy}", run_id, windows, conf.get("approve_windows"))
    return context(day, run_id=run_id, dag_run=Run("backfill", conf))


def record_size(dag_id: str, run_id: str, windows: int, approve: Any = None) -> None:
    HistoryStore.from_airflow().record(
        BackfillSizeRecord(
            dag_id=dag_id,
            run_id=run_id,
            backfill_id=7,
            windows=windows,
            approve_windows=approve,
            recorded_at=pendulum.now("UTC"),
        )
    )


def scheduled(day: date, n: int) -> dict[str, Any]:
    return context(day, run_id=f"scheduled__{day}_{n}", dag_run=Run("scheduled"))


def expensive(day: date) -> list[int]:
    """Sales of the day priced at or above 400.00: the ones v2 pays differently."""
    first = (day - START).days * 2000 + 1
    return [
        i for i in range(first, first + 2000) if Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5") >= 400
    ]


CORRECTIVE = {"semantics": "corrective", "reason": "contract fix", "policy_version": "v2"}


@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_corrective_backfill_stages_diffs_swaps_and_records(
    loaded: Any, history: HistoryStore, strategy: str
) -> None:
    guarded(strategy).execute(scheduled(DAY, 1))
    out = guarded(strategy, policy="v2").execute(backfill(DAY, 2, **CORRECTIVE))
    changed = expensive(DAY)
    assert (
        out["diff"]["changed"] == len(changed) and out["diff"]["added"] == 0 and out["diff"]["removed"] == 0
    )
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")
    writes = history.writes(target="warehouse:payouts")
    assert [(w["ordinal"], w["dataset_version"], w["semantics"], w["policy_version"]) for w in writes] == [
        (1, 1, None, "v1"),
        (2, 2, "corrective", "v2"),
    ]
    diff = json.loads(writes[1]["diff"])
    delta = sum((amount(i, "v2") - amount(i, "v1") for i in changed), Decimal("0"))
    recorded = Decimal(str(diff["measures"]["amount_eur"]["delta"])).quantize(Decimal("0.01"))
    assert recorded == delta


def test_replay_reproduces_the_recorded_checksum_without_touching_production(
    loaded: Any, history: HistoryStore
) -> None:
    first = guarded().execute(scheduled(DAY, 1))  # v1, recorded
    guarded(policy="v2").execute(backfill(DAY, 2, **CORRECTIVE))
    production = table_checksum(loaded.engine, "payouts")
    out = guarded(policy="v2").execute(backfill(DAY, 3, semantics="replay", reason="incident 42"))
    assert out["replay_matches"] is True and out["checksum"] == first["checksum"]
    assert table_checksum(loaded.engine, "payouts") == production  # still v2
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")


def test_undeclared_backfill_is_refused_and_nothing_written(loaded: Any, history: HistoryStore) -> None:
    guarded().execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    with pytest.raises(GuardRefusal, match="declare its rerun semantics"):
        guarded(policy="v2").execute(backfill(DAY, 2))
    assert table_checksum(loaded.engine, "payouts") == before


def test_breach_refuses_the_window_and_trips_the_backfill_kill_switch(
    loaded: Any, history: HistoryStore
) -> None:
    days = [date(2026, 8, d) for d in (17, 18, 19)]
    for n, day in enumerate(days):
        guarded().execute(scheduled(day, n))
    before = table_checksum(loaded.engine, "payouts")
    limit = len(expensive(days[0])) - 1  # the first window of the backfill breaches
    conf = {**CORRECTIVE, "thresholds": {"max_changed_rows": limit}}
    with pytest.raises(GuardRefusal, match=r"max_changed_rows"):
        guarded(policy="v2").execute(backfill(days[0], 10, **conf))
    assert table_checksum(loaded.engine, "payouts") == before
    with pytest.raises(killswitch.KillSwitchTripped, match="backfill guarded_overwrite"):
        guarded(policy="v2").execute(backfill(days[1], 11, **CORRECTIVE))
    assert table_checksum(loaded.engine, "payouts") == before
    refused = [w for w in history.writes(target="warehouse:payouts") if w["status"] == "refused"]
    assert len(refused) == 1 and "max_changed_rows" in refused[0]["message"]
    guarded().execute(scheduled(days[2], 12))  # the nightly run is not a backfill: it still writes


def test_kill_switch_stops_every_write_until_resumed(loaded: Any, history: HistoryStore) -> None:
    killswitch.set_switch(history, "global", None, "incident: stop everything")
    with pytest.raises(killswitch.KillSwitchTripped, match="incident: stop everything"):
        guarded().execute(scheduled(DAY, 1))
    assert window_totals(loaded.engine, "payouts", DAY)[0] == 0
    assert killswitch.clear_switch(history, "global", None) is True
    guarded().execute(scheduled(DAY, 2))
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)


def test_future_window_is_refused(loaded: Any, history: HistoryStore) -> None:
    with pytest.raises(GuardRefusal, match="has not closed yet"):
        guarded().execute(backfill(date(2099, 1, 1), 1, **CORRECTIVE))


def test_half_loaded_source_is_refused_by_the_completeness_check(loaded: Any, history: HistoryStore) -> None:
    guard = GuardConfig(
        measures=["amount_eur"],
        completeness_sql=(
            "SELECT count(*) = 2000 FROM sales WHERE sale_date >= :window_start AND sale_date < :window_end"
        ),
    )
    guarded(guard=guard).execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    with loaded.engine.begin() as conn:  # half of the day's sales have not arrived
        conn.execute(sa.text("DELETE FROM sales WHERE sale_id > 37000 AND sale_id <= 38000"))
    with pytest.raises(GuardRefusal, match="incomplete"):
        guarded(guard=guard, policy="v2").execute(backfill(DAY, 2, **CORRECTIVE))
    assert table_checksum(loaded.engine, "payouts") == before


def test_shrinking_result_is_refused(loaded: Any, history: HistoryStore) -> None:
    guard = GuardConfig(measures=["amount_eur"], thresholds=Thresholds(max_shrink=0.10))
    guarded(guard=guard).execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    with loaded.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM sales WHERE sale_id > 36800 AND sale_id <= 38000"))  # 60 % gone
    with pytest.raises(GuardRefusal, match="shr"):
        guarded(guard=guard, policy="v2").execute(backfill(DAY, 2, **CORRECTIVE))
    assert table_checksum(loaded.engine, "payouts") == before


def test_throttle_reschedules_past_the_hourly_limit(loaded: Any, history: HistoryStore) -> None:
    from airflow.sdk.exceptions import AirflowRescheduleException

    guard = GuardConfig(measures=["amount_eur"], throttle_per_hour=2)
    days = [date(2026, 8, d) for d in (10, 11, 12)]
    for n, day in enumerate(days[:2]):
        guarded(guard=guard).execute(backfill(day, n, **CORRECTIVE))
    with pytest.raises(AirflowRescheduleException):
        guarded(guard=guard).execute(backfill(days[2], 3, **CORRECTIVE))
    assert window_totals(loaded.engine, "payouts", days[2])[0] == 0


def test_conf_prefilled_by_the_ui_dialog_is_accepted(loaded: Any, history: HistoryStore) -> None:
    """The Backfill dialog pre-fills the conf with every DAG param, the guard's own included."""
    guarded().execute(scheduled(DAY, 1))
    conf = {**CORRECTIVE, "idempotent_guard": GuardConfig(cap=31, measures=["amount_eur"]).to_json()}
    out = guarded(policy="v2").execute(backfill(DAY, 2, **conf))
    assert out["semantics"] == "corrective"
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")


# --------------------------------------------------------------------------------------------
# The backfill's size, checked in every guarded task (a backfill created behind the guard).
# --------------------------------------------------------------------------------------------


def rows_of(warehouse: Any, day: date) -> int:
    with warehouse.engine.connect() as conn:
        count = conn.execute(sa.text("SELECT count(*) FROM payouts WHERE sale_date = :d"), {"d": day})
        return int(count.scalar() or 0)


@pytest.mark.parametrize(
    ("windows", "approve", "expected"),
    [
        (None, None, "has no recorded backfill size"),
        (61, None, "covers 61 windows, over the DAG's cap of 31, with no approval"),
        (61, 60, 'with "approve_windows": 60'),
    ],
)
def test_a_backfill_over_the_cap_without_its_exact_approval_writes_nothing(
    loaded: Any, history: HistoryStore, windows: int | None, approve: int | None, expected: str
) -> None:
    before = rows_of(loaded, DAY)
    conf = {**CORRECTIVE, **({"approve_windows": approve} if approve else {})}
    run = backfill(DAY, 40, windows=None, **conf)
    if windows is not None:
        record_size("guarded_overwrite", run["run_id"], windows, approve)
    with pytest.raises(GuardRefusal, match=r"no window of it is written|nothing was written") as raised:
        guarded(policy="v2").execute(run)
    assert expected in str(raised.value)
    assert rows_of(loaded, DAY) == before
    assert history.writes(dag_id="guarded_overwrite", run_id=run["run_id"]) == []


def test_a_backfill_over_the_cap_with_its_exact_approval_writes(loaded: Any, history: HistoryStore) -> None:
    run = backfill(DAY, 41, windows=61, **CORRECTIVE, approve_windows=61)
    out = guarded(policy="v2").execute(run)
    assert out["rows_inserted"] == 2000

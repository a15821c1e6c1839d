"""Late data, `lookback=N`: a run rewrites its own period and the N before it, in one transaction.

Real databases (all four), operators through their own API, a fresh SQLite history store per
test. The expected tables come from the scenario's formula in pure Python and from a plain SQL
INSERT .. SELECT over the source that the operators never see.
"""

from __future__ import annotations

import datetime
import json
import threading
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, ClassVar

import pendulum
import pytest
import sqlalchemy as sa
from airflow.sdk import DAG
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.errors import (
    LockTimeoutError,
    RowsOutsideWindowError,
    WindowError,
)
from airflow_idempotent.examples.payouts import (
    PAYOUT_SQL,
    create_payouts,
    create_sales,
    date_param,
    dialect_of,
    table_checksum,
    window_totals,
)
from airflow_idempotent.guard import GuardBreach, GuardConfig, GuardRefusal, Thresholds, check_scope, sizes
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.lint import lint_paths
from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator
from airflow_idempotent.operators.assets import target_asset
from airflow_idempotent.preview import preview_rerun
from airflow_idempotent.window import (
    MAX_LOOKBACK,
    Window,
    covered_partition_keys,
    covered_windows,
    spanning,
    window_of,
)
from tests.test_guard_operator import backfill, guarded
from tests.test_operators import amount, context, make

FIRST = date(2026, 8, 23)
YESTERDAY = date(2026, 8, 24)
TODAY = date(2026, 8, 25)
PER_DAY = 500
LATE_ID, LATE_PRICE = 900_001, Decimal("123.40")


# --- the truth, in pure Python -------------------------------------------------------------------


def truth(day: date, late: bool = False) -> tuple[int, Decimal]:
    """Rows and sum(amount_eur) of `day`'s payouts (v1): sale ids by day as create_sales makes them."""
    first = (day - FIRST).days * PER_DAY + 1
    total = sum((amount(i) for i in range(first, first + PER_DAY)), Decimal("0"))
    if late:
        total += (LATE_PRICE * Decimal("0.60")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return PER_DAY + late, total


def test_truth_of_the_late_row() -> None:
    assert (LATE_PRICE * Decimal("0.60")).quantize(Decimal("0.01")) == Decimal("74.04")
    assert truth(YESTERDAY, late=True)[0] == 501


# --- helpers -------------------------------------------------------------------------------------


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    """A fresh SQLite history store (and spool) per test."""
    path = tmp_path / "history.db"
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    return HistoryStore(sa.create_engine(f"sqlite:///{path}"))


@pytest.fixture
def loaded(warehouse: Any) -> Any:
    create_sales(warehouse.engine, days=3, per_day=PER_DAY, start=FIRST)
    create_payouts(warehouse.engine)
    return warehouse


def run(day: date, n: int) -> dict[str, Any]:
    class DagRun:
        run_type = "scheduled"
        conf: ClassVar[dict[str, Any]] = {}

    return context(day, run_id=f"scheduled__{day}_{n}", dag_run=DagRun())


def late_row(engine: sa.Engine) -> None:
    """A sale of yesterday that reaches the source after yesterday's run."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO sales (sale_id, sale_date, price_eur) VALUES (:i, :d, CAST(:p AS DECIMAL(10,2)))"
            ),
            {"i": LATE_ID, "d": date_param(dialect_of(engine), YESTERDAY), "p": str(LATE_PRICE)},
        )


def clean_run(engine: sa.Engine, first: date, after: date) -> tuple[int, Decimal, str]:
    """The table one clean run over [first, after) gives: plain SQL over the source, by hand."""
    create_payouts(engine, table="payouts_clean")
    dialect = dialect_of(engine)
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"INSERT INTO payouts_clean (sale_id, sale_date, amount_eur, rate) {PAYOUT_SQL}"),
            {
                "window_start": date_param(dialect, first),
                "window_end": date_param(dialect, after),
                "policy_version": "v1",
            },
        )
    return table_checksum(engine, "payouts_clean")


def writes(store: HistoryStore) -> list[dict[str, Any]]:
    return sorted(store.writes(target="warehouse:payouts"), key=lambda w: (w["window_label"], w["ordinal"]))


# --- the covered periods (window.covered_windows) --------------------------------------------------


def test_covered_windows_tile_time_before_the_window() -> None:
    day = window_of("2026-08-25")
    assert [w.label() for w in covered_windows(day, 2, "day")] == ["2026-08-23", "2026-08-24", "2026-08-25"]
    assert covered_windows(day, 0, "day") == [day]
    march = window_of("2026-03-01", "month")
    months = covered_windows(march, 2, "month")  # January 31 days, February 28
    assert [(w.start_date(), w.end_date()) for w in months] == [
        (date(2026, 1, 1), date(2026, 2, 1)),
        (date(2026, 2, 1), date(2026, 3, 1)),
        (date(2026, 3, 1), date(2026, 4, 1)),
    ]
    paris = window_of("2026-03-30", "day", "Europe/Paris")  # the day before had 23 hours
    before = covered_windows(paris, 1, "day")[0]
    assert before.label() == "2026-03-29" and before.end - before.start == timedelta(hours=23)
    hour = Window(
        pendulum.datetime(2026, 8, 25, 10, tz="UTC"), pendulum.datetime(2026, 8, 25, 11, tz="UTC"), "t"
    )
    three = covered_windows(hour, 2, timedelta(hours=1))
    assert three[0].start == pendulum.datetime(2026, 8, 25, 8, tz="UTC") and spanning(three).end == hour.end


def test_covered_windows_refuse_a_window_off_the_period_boundary() -> None:
    odd = Window(
        pendulum.datetime(2026, 8, 25, 6, tz="UTC"), pendulum.datetime(2026, 8, 26, 6, tz="UTC"), "t"
    )
    with pytest.raises(WindowError, match="does not start on a day boundary"):
        covered_windows(odd, 1, "day")


# --- the write: late rows absorbed, on all four databases -----------------------------------------


@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_lookback_absorbs_a_late_row_like_a_clean_run_over_both_days(
    loaded: Any, history: HistoryStore, strategy: str
) -> None:
    first = make(strategy).execute(run(YESTERDAY, 1))  # yesterday's run, lookback=0 as before
    assert "periods" not in first and first["ordinal"] == 1
    late_row(loaded.engine)
    assert window_totals(loaded.engine, "payouts", YESTERDAY) == truth(YESTERDAY)  # not yet absorbed

    keep = {"delete_missing": False} if strategy == "merge" else {}  # then a period's inserts are known
    out = make(strategy, lookback=1, **keep).execute(run(TODAY, 1))

    assert window_totals(loaded.engine, "payouts", YESTERDAY) == truth(YESTERDAY, late=True)
    assert window_totals(loaded.engine, "payouts", TODAY) == truth(TODAY)
    assert table_checksum(loaded.engine, "payouts") == clean_run(
        loaded.engine, YESTERDAY, TODAY + timedelta(1)
    )
    assert out["window"] == "[2026-08-24, 2026-08-26)" and out["lookback"] == 1
    assert [(p["window"], p["row_count"], p["ordinal"]) for p in out["periods"]] == [
        ("2026-08-24", 501, 2),
        ("2026-08-25", 500, 1),
    ]
    assert out["ordinal"] == 1  # the run's own period's write

    recorded = writes(history)
    assert [(w["window_label"], w["ordinal"], w["dataset_version"], w["row_count"]) for w in recorded] == [
        ("2026-08-24", 1, 1, 500),
        ("2026-08-24", 2, 2, 501),  # the late row changed the result: a new dataset version
        ("2026-08-25", 1, 1, 500),
    ]
    late_write = recorded[1]
    if strategy == "overwrite":
        assert (late_write["rows_deleted"], late_write["rows_inserted"]) == (500, 501)
    else:
        assert late_write["rows_inserted"] == 1  # an upsert only adds: 501 - 500
    assert "lookback=1: period 1 of 2" in late_write["message"]
    # A period's checksum is the one a write of that period alone records: a plain rerun of
    # yesterday now finds the same result (same dataset version, next ordinal).
    again = make(strategy).execute(run(YESTERDAY, 2))
    assert (again["checksum"], again["ordinal"], again["dataset_version"]) == (late_write["checksum"], 3, 2)


def test_rows_outside_the_covered_range_refuse_and_nothing_is_written(
    loaded: Any, history: HistoryStore
) -> None:
    make("overwrite").execute(run(YESTERDAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    unbounded = PAYOUT_SQL.replace("s.sale_date >= :window_start AND ", "")  # also the 23rd
    with pytest.raises(RowsOutsideWindowError, match=r"outside the window \[2026-08-24, 2026-08-26\)"):
        make("overwrite", sql=unbounded, lookback=1).execute(run(TODAY, 1))
    assert table_checksum(loaded.engine, "payouts") == before
    assert len(writes(history)) == 1


def test_a_lookback_write_holds_every_covered_periods_lock(loaded: Any, history: HistoryStore) -> None:
    """A write of yesterday alone (a rerun, a backfill) and today's lookback write exclude each other."""
    adapter = adapter_for(loaded.engine)
    held, release = threading.Event(), threading.Event()

    def hold_yesterday() -> None:
        with adapter.locked_transaction("payouts", window_of(YESTERDAY.isoformat()), 10):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_yesterday)
    holder.start()
    try:
        assert held.wait(10)
        with pytest.raises(LockTimeoutError, match=r"\[2026-08-24, 2026-08-26\)"):
            make("overwrite", lookback=1, lock_timeout=0.3).execute(run(TODAY, 1))
    finally:
        release.set()
        holder.join()
    assert window_totals(loaded.engine, "payouts", TODAY) == (0, Decimal("0.00"))
    make("overwrite", lookback=1).execute(run(TODAY, 2))  # free again: it writes
    assert window_totals(loaded.engine, "payouts", TODAY) == truth(TODAY)


# --- refused when the DAG is parsed ---------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1", MAX_LOOKBACK + 1])
def test_a_bad_lookback_is_refused_at_parse_time(bad: Any) -> None:
    with pytest.raises(WindowError, match=f"lookback={bad!r} is not valid: give a whole number"):
        make("overwrite", lookback=bad)


def test_lookback_refusals_name_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(WindowError, match=r"declares none: declare it, e\.g\. granularity='day'"):
        make("overwrite", lookback=1, granularity=None)
    with pytest.raises(ValueError, match="lookback=1 needs a partition_column"):
        MergeOperator(
            task_id="m",
            table="payouts",
            sql=PAYOUT_SQL,
            key_columns=["sale_id"],
            granularity="day",
            lookback=1,
        )
    with pytest.raises(ValueError, match="skip_if_unchanged cannot be combined with lookback"):
        make("overwrite", lookback=1, skip_if_unchanged=True)
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", '{"conn_type": "spark_connect", "host": "spark", "port": 15002}')
    # a Spark table may be Delta or Iceberg (lookback taken) or parquet (refused): only the catalog
    # knows, when the task runs (tests/spark/test_spark_lookback.py)
    assert make("overwrite", conn_id="lake", lookback=1).lookback == 1


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)  # refused before any database
def test_a_refused_lookback_writes_nothing(loaded: Any, history: HistoryStore) -> None:
    for bad in (-1, MAX_LOOKBACK + 1):
        with pytest.raises(WindowError):
            make("overwrite", lookback=bad).execute(run(TODAY, 1))
    assert table_checksum(loaded.engine, "payouts")[0] == 0 and writes(history) == []


# --- the guard counts the periods rewritten -------------------------------------------------------


def test_the_guard_counts_every_period_each_run_rewrites() -> None:
    guard = GuardConfig(cap=5, lookback=1)
    three = [window_of(f"2026-08-{d}") for d in (20, 21, 22)]
    now = datetime.datetime(2026, 9, 1, tzinfo=datetime.timezone.utc)

    class Intent:
        approve_windows: int | None = None

    with pytest.raises(
        GuardRefusal, match=r"covers 6 windows \(3 runs x \(1 \+ lookback 1\)\).*\"approve_windows\": 6"
    ):
        check_scope(guard, Intent(), three, now)  # type: ignore[arg-type]
    Intent.approve_windows = 6
    check_scope(guard, Intent(), three, now)  # type: ignore[arg-type]
    check_scope(GuardConfig(cap=5), None, three, now)  # lookback 0: 3 windows, as before
    size = {"backfill_id": 7, "windows": 3, "approve_windows": 3}
    with pytest.raises(GuardRefusal, match="covers 6 windows"):
        sizes.check_size(guard, size, "d", "r")
    sizes.check_size(guard, size | {"approve_windows": 6}, "d", "r")
    with pytest.raises(GuardRefusal, match="lookback=-1 is not valid"):
        GuardConfig(lookback=-1)


def test_an_operator_must_read_the_guards_lookback() -> None:
    guard = GuardConfig(cap=31, lookback=1)
    dag = DAG(
        dag_id="guarded_lookback",
        schedule="@daily",
        start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
        params=guard.param(),
    )
    with pytest.raises(GuardRefusal, match=r"lookback=0.*lookback=1"):
        PartitionOverwriteOperator(
            task_id="w",
            dag=dag,
            table="payouts",
            partition_column="sale_date",
            sql=PAYOUT_SQL,
            granularity="day",
        )


@pytest.mark.parametrize("warehouse", ["postgres", "sqlite"], indirect=True)
def test_a_guarded_backfill_with_lookback_diffs_the_covered_range_and_records_each_period(
    loaded: Any, history: HistoryStore
) -> None:
    guard = GuardConfig(cap=31, measures=["amount_eur"], lookback=1)
    guarded("overwrite", guard, lookback=1).execute(run(YESTERDAY, 1))  # scheduled: 23rd and 24th
    late_row(loaded.engine)
    conf = {"semantics": "corrective", "reason": "late sales of the 24th", "policy_version": "v1"}
    out = guarded("overwrite", guard, lookback=1).execute(backfill(TODAY, 1, **conf))

    assert out["diff"]["added"] == 1 + PER_DAY and out["diff"]["removed"] == out["diff"]["changed"] == 0
    assert window_totals(loaded.engine, "payouts", YESTERDAY) == truth(YESTERDAY, late=True)
    assert table_checksum(loaded.engine, "payouts") == clean_run(loaded.engine, FIRST, TODAY + timedelta(1))
    recorded = writes(history)
    assert [(w["window_label"], w["ordinal"], w["row_count"], w["semantics"]) for w in recorded] == [
        ("2026-08-23", 1, 500, None),
        ("2026-08-24", 1, 500, None),
        ("2026-08-24", 2, 501, "corrective"),
        ("2026-08-25", 1, 500, "corrective"),
    ]
    assert all(json.loads(w["diff"])["added"] == 501 for w in recorded[2:])  # the range's diff, on each


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_the_rerun_preview_compares_every_covered_period(loaded: Any, history: HistoryStore) -> None:
    dag = DAG(dag_id="late_payouts", schedule="@daily", start_date=pendulum.datetime(2026, 8, 1, tz="UTC"))
    make("overwrite", dag=dag, key_columns=["sale_id"], lookback=1)
    make("overwrite").execute(run(YESTERDAY, 1))
    make("overwrite").execute(run(TODAY, 1))
    late_row(loaded.engine)
    before = table_checksum(loaded.engine, "payouts")

    (task,) = preview_rerun(dag, window_of(TODAY.isoformat())).tasks

    assert task.periods == ["2026-08-24", "2026-08-25"] and task.write is not None
    assert task.write.window == "[2026-08-24, 2026-08-26)"
    assert (task.write.rows_before, task.write.rows_after) == (2 * PER_DAY, 2 * PER_DAY + 1)
    assert task.write.diff is not None and task.write.diff.added == 1  # the late row, nothing else
    assert any("rewrites 2 periods (2026-08-24, 2026-08-25)" in r for r in task.reasons)
    assert table_checksum(loaded.engine, "payouts") == before  # a preview writes nothing


def test_the_linter_answers_that_a_lookback_task_rewrites_the_periods_before_its_window(
    tmp_path: Path,
) -> None:
    dag_file = tmp_path / "late.py"
    dag_file.write_text(
        "import pendulum\n"
        "from airflow.sdk import DAG\n"
        "from airflow_idempotent.operators import PartitionOverwriteOperator\n"
        "with DAG('late', schedule='@daily', start_date=pendulum.datetime(2026, 8, 1, tz='UTC')):\n"
        "    PartitionOverwriteOperator(task_id='w', table='payouts', partition_column='sale_date',\n"
        "        sql='SELECT 1', granularity='day', lookback=2)\n"
    )
    (answer,) = lint_paths([dag_file]).tasks
    assert answer.window == (
        "The run's logical date plus granularity=day, and the 2 period(s) before it (lookback=2, for rows "
        "that arrive late) (PartitionOverwriteOperator)."
    )


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_a_breach_over_the_covered_range_refuses_every_period_and_swaps_nothing(
    loaded: Any, history: HistoryStore
) -> None:
    guard = GuardConfig(cap=31, measures=["amount_eur"], lookback=1, thresholds=Thresholds(max_added_rows=0))
    guarded("overwrite", guard, lookback=1).execute(run(YESTERDAY, 1))
    late_row(loaded.engine)
    before = table_checksum(loaded.engine, "payouts")
    conf = {"semantics": "corrective", "reason": "late sales of the 24th", "policy_version": "v1"}
    with pytest.raises(GuardBreach, match="max_added_rows"):
        guarded("overwrite", guard, lookback=1).execute(backfill(TODAY, 1, **conf))
    assert table_checksum(loaded.engine, "payouts") == before
    refused = [(w["window_label"], w["row_count"]) for w in writes(history) if w["status"] == "refused"]
    assert refused == [("2026-08-24", None), ("2026-08-25", None)]


def test_a_partitioned_run_with_lookback_announces_every_partition_it_rewrote() -> None:
    events = OutletEventAccessors()
    context = {"outlet_events": events, "partition_key": "2026-08-25T00:00:00"}
    op = make("overwrite", lookback=2)
    op.emit_asset_event(context, window_of("2026-08-25"), {"periods": [{"window": "x"}]})
    event = events[target_asset("warehouse", "payouts")]
    assert event.partition_keys == {"2026-08-23T00:00:00", "2026-08-24T00:00:00", "2026-08-25T00:00:00"}
    days = [window_of(d) for d in ("2026-08-24", "2026-08-25")]
    assert covered_partition_keys("2026-08-25", days) == ["2026-08-24", "2026-08-25"]
    assert covered_partition_keys("eu|2026-08-25", days) == [
        "eu|2026-08-25"
    ]  # unknown spelling: its own only

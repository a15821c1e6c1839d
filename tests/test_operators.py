"""The operators on real databases: crash then rerun, random order, concurrency, bad input.

The operators run through their own API (`execute(context)` with a run's context), which is
what Airflow calls; a handful of real DAG runs live in test_dagrun.py. Every expected figure
comes from the scenario's formula computed in pure Python here, never from the code under test.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.errors import (
    InvalidIdentifierError,
    LockTimeoutError,
    MergeKeyError,
    NonDeterministicSQLError,
    RowsOutsideWindowError,
    SchemaError,
    WindowError,
)
from airflow_idempotent.examples.payouts import (
    PAYOUT_SQL,
    create_payouts,
    create_sales,
    simulate_crash,
    table_checksum,
    window_totals,
)
from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator
from airflow_idempotent.operators.base import WindowWriteOperator

START = date(2026, 8, 1)
DAY = date(2026, 8, 25)
PER_DAY = 2000


# --- the scenario's truth, in pure Python ---------------------------------------------------------


def amount(i: int, policy: str = "v1") -> Decimal:
    price = Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")
    rate = Decimal("0.55") if policy == "v2" and price >= 400 else Decimal("0.60")
    return (price * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def day_truth(day: date, policy: str = "v1") -> tuple[int, Decimal]:
    first = (day - START).days * PER_DAY + 1
    return PER_DAY, sum((amount(i, policy) for i in range(first, first + PER_DAY)), Decimal("0"))


def test_truth_is_the_scenarios_known_figure() -> None:
    assert day_truth(DAY) == (2000, Decimal("299730.00"))


# --- helpers -------------------------------------------------------------------------------------


def context(day: date | None = DAY, **extra: Any) -> dict[str, Any]:
    """A run's context as Airflow hands it to execute(): @daily cron gives a zero-width interval."""
    if day is None:
        return {"logical_date": None, "data_interval_start": None, "data_interval_end": None, **extra}
    at = pendulum.datetime(day.year, day.month, day.day, tz="UTC")
    return {"logical_date": at, "data_interval_start": at, "data_interval_end": at, **extra}


def make(strategy: str, **kwargs: Any) -> WindowWriteOperator:
    common: dict[str, Any] = {
        "task_id": f"write_{strategy}",
        "conn_id": "warehouse",
        "table": "payouts",
        "partition_column": "sale_date",
        "sql": PAYOUT_SQL,
        "parameters": {"policy_version": "v1"},
        "granularity": "day",
    }
    common.update(kwargs)
    if strategy == "merge":
        common.setdefault("key_columns", ["sale_id"])
        common.setdefault("delete_missing", True)
        return MergeOperator(**common)
    return PartitionOverwriteOperator(**common)


STRATEGIES = ("overwrite", "merge")


@pytest.fixture
def loaded(warehouse: Any) -> Any:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    return warehouse


def payouts_snapshot(engine: sa.Engine) -> tuple[int, Decimal, str]:
    return table_checksum(engine, "payouts")


# --- crash then rerun ----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_crash_then_three_reruns_give_the_truth(loaded: Any, strategy: str) -> None:
    simulate_crash(loaded.engine, DAY, rows=1247)
    assert window_totals(loaded.engine, "payouts", DAY)[0] == 1247
    for _ in range(3):
        result = make(strategy).execute(context())
        assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)
    assert result["source_rows"] == 2000


def test_overwrite_reports_rows_deleted_and_inserted(loaded: Any) -> None:
    simulate_crash(loaded.engine, DAY, rows=1247)
    first = make("overwrite").execute(context())
    second = make("overwrite").execute(context())
    assert (first["rows_deleted"], first["rows_inserted"]) == (1247, 2000)
    assert (second["rows_deleted"], second["rows_inserted"]) == (2000, 2000)


def test_merge_reports_inserted_and_updated(loaded: Any) -> None:
    simulate_crash(loaded.engine, DAY, rows=1247)
    first = make("merge").execute(context())
    assert (first["rows_inserted"], first["rows_updated"], first["rows_deleted"]) == (753, 1247, 0)


def test_merge_delete_missing_removes_rows_the_source_lost(loaded: Any) -> None:
    make("merge").execute(context())
    with loaded.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM sales WHERE sale_id > 49990"))  # the day's last 10 sales vanish
    result = make("merge").execute(context())
    assert result["rows_deleted"] == 10
    first = (DAY - START).days * PER_DAY + 1
    expected = sum((amount(i) for i in range(first, 49991)), Decimal("0"))
    assert window_totals(loaded.engine, "payouts", DAY) == (1990, expected)


def test_policy_v2_changes_only_the_expensive_items(loaded: Any) -> None:
    make("overwrite", parameters={"policy_version": "v2"}).execute(context())
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")
    assert day_truth(DAY, "v2")[1] < day_truth(DAY, "v1")[1]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_failure_inside_the_transaction_commits_nothing(loaded: Any, strategy: str) -> None:
    """A row in the middle of the insert violates NOT NULL: the delete is rolled back with it."""
    simulate_crash(loaded.engine, DAY, rows=1247)
    before = payouts_snapshot(loaded.engine)
    failing = PAYOUT_SQL.replace(
        "AS amount_eur", "* CASE WHEN s.sale_id = 49000 THEN NULL ELSE 1 END AS amount_eur"
    )
    with pytest.raises(Exception, match=r"(?i)null|constraint|amount_eur"):
        make(strategy, sql=failing).execute(context())
    assert payouts_snapshot(loaded.engine) == before
    make(strategy).execute(context())
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)


# --- every window, three times, in random order ---------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_month_three_times_in_random_order_equals_one_clean_pass(loaded: Any, strategy: str) -> None:
    days = [START + timedelta(days=d) for d in range(30)]
    for day in days:
        make(strategy).execute(context(day))
    clean = payouts_snapshot(loaded.engine)
    with loaded.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM payouts"))
    rng = random.Random(20260825)
    order = days * 3
    rng.shuffle(order)
    simulate_crash(loaded.engine, order[0], rows=1247)
    for day in order:
        make(strategy).execute(context(day))
    assert payouts_snapshot(loaded.engine) == clean
    month_total = sum((amount(i) for i in range(1, 60001)), Decimal("0"))
    assert clean[:2] == (60000, month_total)


# --- concurrency ---------------------------------------------------------------------------------


def run_threads(*targets: Callable[[], Any]) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as err:  # collected and asserted by the caller
                errors.append(err)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "an attempt hung: deadlock"
    return errors


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_concurrent_attempts_on_one_window(loaded: Any, strategy: str) -> None:
    simulate_crash(loaded.engine, DAY, rows=1247)
    errors = run_threads(
        lambda: make(strategy).execute(context()),
        lambda: make("overwrite" if strategy == "merge" else "merge").execute(context()),
    )
    assert errors == []
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)


def test_loser_waits_then_fails_with_a_clear_message(loaded: Any) -> None:
    make("overwrite").execute(context())
    before = payouts_snapshot(loaded.engine)
    adapter = adapter_for(loaded.engine)
    op = make("overwrite", lock_timeout=0.5)
    window = op.window(context())
    holding = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with adapter.locked_transaction("payouts", window, 10):
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert holding.wait(10)
        with pytest.raises(LockTimeoutError, match=r"another attempt .* 2026-08-25 .* lock_timeout"):
            op.execute(context())
    finally:
        release.set()
        thread.join(10)
    assert payouts_snapshot(loaded.engine) == before


# --- bad input: a clear error and an unchanged table ----------------------------------------------


def _refused(
    loaded: Any, build: Callable[[], WindowWriteOperator], ctx: dict[str, Any], error: type, match: str
) -> None:
    simulate_crash(loaded.engine, DAY, rows=1247)
    before = payouts_snapshot(loaded.engine)
    with pytest.raises(error, match=match):
        build().execute(ctx)
    assert payouts_snapshot(loaded.engine) == before


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_clock_reading_sql_is_refused(loaded: Any, strategy: str) -> None:
    sql = PAYOUT_SQL.replace("s.sale_date >= :window_start", "s.sale_date >= CURRENT_DATE - 7")
    _refused(
        loaded,
        lambda: make(strategy, sql=sql),
        context(),
        NonDeterministicSQLError,
        r"(?i)current_date.*window",
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_random_sql_is_refused(loaded: Any, strategy: str) -> None:
    sql = PAYOUT_SQL.replace("AS rate", "* (1 + RANDOM() * 0) AS rate")
    _refused(loaded, lambda: make(strategy, sql=sql), context(), NonDeterministicSQLError, r"(?i)random")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_unknown_table_is_refused(loaded: Any, strategy: str) -> None:
    _refused(
        loaded, lambda: make(strategy, table="payoutz"), context(), SchemaError, r"payoutz.*does not exist"
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_unknown_column_is_refused(loaded: Any, strategy: str) -> None:
    sql = PAYOUT_SQL.replace("AS rate", "AS rate, 1 AS bonus")
    _refused(loaded, lambda: make(strategy, sql=sql), context(), SchemaError, r"bonus.*does not have")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_unknown_partition_column_is_refused(loaded: Any, strategy: str) -> None:
    _refused(
        loaded,
        lambda: make(strategy, partition_column="paid_on"),
        context(),
        SchemaError,
        r"paid_on.*not a column of payouts",
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_partition_column_of_the_wrong_type_is_refused(loaded: Any, strategy: str) -> None:
    _refused(
        loaded,
        lambda: make(strategy, partition_column="sale_id"),
        context(),
        SchemaError,
        r"sale_id.*not a date or timestamp",
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_rows_outside_the_window_are_refused(loaded: Any, strategy: str) -> None:
    sql = PAYOUT_SQL + " OR s.sale_id = 1"
    _refused(
        loaded,
        lambda: make(strategy, sql=sql),
        context(),
        RowsOutsideWindowError,
        r"outside the window 2026-08-25 .*2026-08-01",
    )


def test_duplicate_merge_keys_are_refused_and_named(loaded: Any) -> None:
    sql = f"{PAYOUT_SQL} UNION ALL {PAYOUT_SQL.replace('WHERE', 'WHERE s.sale_id IN (48001, 48002) AND')}"
    _refused(
        loaded,
        lambda: make("merge", sql=sql),
        context(),
        MergeKeyError,
        r"duplicate key\(s\) 48001 \(2 rows\), 48002",
    )


def test_null_merge_keys_are_refused(loaded: Any) -> None:
    sql = PAYOUT_SQL.replace(
        "SELECT s.sale_id,", "SELECT CASE WHEN s.sale_id = 48005 THEN NULL ELSE s.sale_id END AS sale_id,"
    )
    _refused(loaded, lambda: make("merge", sql=sql), context(), MergeKeyError, r"NULL key")


def test_merge_without_a_unique_key_is_refused(loaded: Any) -> None:
    create_payouts(loaded.engine, table="payouts_naive", keyed=False)
    with pytest.raises(SchemaError, match=r"no primary key or unique index on \(sale_id\)"):
        make("merge", table="payouts_naive").execute(context())


DAILY_TOTALS_SQL = (
    "SELECT s.sale_date AS order_date, 'all' AS customer, SUM(s.price_eur) AS total FROM sales s "
    "WHERE s.sale_date >= :window_start AND s.sale_date < :window_end GROUP BY s.sale_date"
)


def test_merge_on_part_of_the_tables_key_names_the_key_not_a_new_index(loaded: Any) -> None:
    """A daily table keyed by (order_date, customer) merged on customer alone: a unique index on
    (customer) would allow one row per customer for all days, so the advice is the table's own key."""
    with loaded.engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE daily_totals (order_date DATE NOT NULL, customer VARCHAR(20) NOT NULL, "
                "total DECIMAL(12,2), PRIMARY KEY (order_date, customer))"
            )
        )
    task = make(
        "merge",
        table="daily_totals",
        key_columns=["customer"],
        partition_column="order_date",
        sql=DAILY_TOTALS_SQL,
        parameters={},
        delete_missing=False,
    )
    with pytest.raises(SchemaError) as raised:
        task.execute(context())
    message = str(raised.value)
    assert "CREATE UNIQUE INDEX" not in message
    assert "(order_date, customer)" in message
    assert "key_columns=['order_date', 'customer']" in message
    with loaded.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM daily_totals")).scalar_one() == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_missing_logical_date_is_refused(loaded: Any, strategy: str) -> None:
    _refused(
        loaded, lambda: make(strategy), context(None), WindowError, r"(?i)no logical date.*--logical-date"
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_zero_width_window_without_granularity_is_refused(loaded: Any, strategy: str) -> None:
    _refused(loaded, lambda: make(strategy, granularity=None), context(), WindowError, r"granularity")


@pytest.mark.parametrize(
    "field, value",
    [
        ("table", "payouts; DROP TABLE sales"),
        ("table", 'payouts" --'),
        ("partition_column", "sale_date) OR (1=1"),
        ("key_columns", ["sale_id; DELETE FROM sales"]),
    ],
)
def test_identifier_carrying_sql_is_refused_at_parse_time(field: str, value: Any) -> None:
    with pytest.raises(InvalidIdentifierError, match="not a plain identifier"):
        make("merge", **{field: value})


def test_parameter_named_like_the_window_is_refused(loaded: Any) -> None:
    _refused(
        loaded,
        lambda: make("overwrite", parameters={"policy_version": "v1", "window_start": "2020-01-01"}),
        context(),
        SchemaError,
        r"window_start.*set by the window",
    )


def test_data_interval_with_width_wins_over_granularity(loaded: Any) -> None:
    """A timetable with a real data interval (here two days) writes exactly that interval."""
    ctx = {
        "logical_date": pendulum.datetime(2026, 8, 24, tz="UTC"),
        "data_interval_start": pendulum.datetime(2026, 8, 24, tz="UTC"),
        "data_interval_end": pendulum.datetime(2026, 8, 26, tz="UTC"),
    }
    result = make("overwrite").execute(ctx)
    assert result["rows_inserted"] == 4000
    truth = day_truth(date(2026, 8, 24))[1] + day_truth(DAY)[1]
    assert payouts_snapshot(loaded.engine)[:2] == (4000, truth)


def test_merge_looks_for_bad_keys_only_to_name_them(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """No engine runs the key pass on a clean source: the upsert refuses (PostgreSQL) or miscounts
    (DuckDB) repeated keys, or the source's count counts its keys too (MariaDB, SQLite); the pass
    runs only then, to name them (per-engine paths: test_merge_keys.py)."""
    from airflow_idempotent import strategies

    calls: list[int] = []
    real = strategies.check_keys
    monkeypatch.setattr(strategies, "check_keys", lambda *a, **k: calls.append(1) or real(*a, **k))
    make("merge").execute(context())
    assert calls == []
    sql = f"{PAYOUT_SQL} UNION ALL {PAYOUT_SQL.replace('WHERE', 'WHERE s.sale_id IN (48001) AND')}"
    with pytest.raises(MergeKeyError, match=r"duplicate key\(s\) 48001 \(2 rows\)"):
        make("merge", sql=sql).execute(context())

"""The payouts scenario's data, on every warehouse, against figures computed here in pure Python.

Every expected figure is derived from the scenario's formula (docs/contributing.md, The payouts scenario) with
Decimal arithmetic in this file, and the known figures of the scenario are asserted as literals
too, so neither the generator nor the oracle can drift silently.
"""

from __future__ import annotations

import threading
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples import payouts

START = date(2026, 8, 1)
PER_DAY = 2000
DAYS = 30
DAY = date(2026, 8, 25)
CRASHED_ROWS = 1247


# --- the scenario in pure Python -----------------------------------------------------------------


def price(i: int) -> Decimal:
    return Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")


def sale_date(i: int) -> date:
    return START + timedelta(days=(i - 1) // PER_DAY)


def rate(i: int, policy: str) -> Decimal:
    return Decimal("0.55") if policy == "v2" and price(i) >= 400 else Decimal("0.60")


def amount(i: int, policy: str) -> Decimal:
    return (price(i) * rate(i, policy)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def sale_ids(day: date) -> range:
    first = (day - START).days * PER_DAY + 1
    return range(first, first + PER_DAY)


def expected_rows(ids: range, policy: str = "v1") -> list[tuple[int, date, Decimal, Decimal]]:
    return [(i, sale_date(i), amount(i, policy), rate(i, policy)) for i in ids]


def test_python_oracle_matches_the_scenario_literals() -> None:
    ids = sale_ids(DAY)
    assert ids[0] == 48001 and ids[-1] == 50000
    assert all(sale_date(i) == DAY for i in ids)
    full = sum(amount(i, "v1") for i in ids)
    crashed = sum(amount(i, "v1") for i in ids[:CRASHED_ROWS])
    assert full == Decimal("299730.00")
    assert full + crashed == Decimal("486745.80")
    assert 2 * full + crashed == Decimal("786475.80")


def _d(wh, value: date):
    """Bind a date the way the warehouse stores it (ISO text on SQLite)."""
    return value.isoformat() if wh.kind == "sqlite" else value


def _append_window(wh, table: str, day: date, policy: str = "v1") -> None:
    """The naive job: append the window's payouts, no delete, no key."""
    sql = f"INSERT INTO {table} (sale_id, sale_date, amount_eur, rate) {payouts.PAYOUT_SQL}"
    params = {
        "window_start": _d(wh, day),
        "window_end": _d(wh, day + timedelta(days=1)),
        "policy_version": policy,
    }
    with wh.engine.begin() as conn:
        conn.execute(sa.text(sql), params)


def test_sales_generator(warehouse) -> None:
    wh = warehouse
    assert payouts.create_sales(wh.engine) == DAYS * PER_DAY == 60_000
    with wh.engine.connect() as conn:
        per_day = conn.execute(
            sa.text("SELECT COUNT(*) FROM sales WHERE sale_date = :d"), {"d": _d(wh, DAY)}
        ).scalar_one()
        first, last, n_days = conn.execute(
            sa.text("SELECT MIN(sale_date), MAX(sale_date), COUNT(DISTINCT sale_date) FROM sales")
        ).one()
        sample = conn.execute(
            sa.text(
                "SELECT sale_id, sale_date, price_eur FROM sales "
                "WHERE sale_id IN (1, 2000, 2001, 48001, 60000)"
            )
        ).all()
    assert per_day == 2000
    assert str(first)[:10] == "2026-08-01" and str(last)[:10] == "2026-08-30" and n_days == 30
    got = {
        int(r[0]): (str(r[1])[:10], Decimal(repr(r[2]) if isinstance(r[2], float) else r[2])) for r in sample
    }
    assert got == {i: (sale_date(i).isoformat(), price(i)) for i in (1, 2000, 2001, 48001, 60000)}

    # Re-creating replaces the table, it never appends.
    assert payouts.create_sales(wh.engine, days=2, per_day=3, start=date(2026, 1, 30)) == 6
    with wh.engine.connect() as conn:
        dates = conn.execute(sa.text("SELECT sale_date FROM sales ORDER BY sale_id")).scalars().all()
    assert [str(x)[:10] for x in dates] == ["2026-01-30"] * 3 + ["2026-01-31"] * 3


def test_crash_and_naive_append(warehouse) -> None:
    wh = warehouse
    payouts.create_sales(wh.engine)
    payouts.create_payouts(wh.engine)
    payouts.create_payouts(wh.engine)  # IF NOT EXISTS: a second call is harmless
    payouts.create_payouts(wh.engine, "payouts_naive", keyed=False)
    ids = sale_ids(DAY)

    # The full window, written once, is the scenario's known truth.
    _append_window(wh, "payouts", DAY)
    assert payouts.window_totals(wh.engine, "payouts", DAY) == (2000, Decimal("299730.00"))
    assert payouts.table_checksum(wh.engine, "payouts") == payouts.rows_checksum(expected_rows(ids))
    assert payouts.window_totals(wh.engine, "payouts", DAY + timedelta(days=1)) == (0, Decimal("0.00"))

    # With a key, appending the same window again is refused by the database.
    with pytest.raises(sa.exc.DBAPIError):
        _append_window(wh, "payouts", DAY)
    assert payouts.window_totals(wh.engine, "payouts", DAY) == (2000, Decimal("299730.00"))

    # The crash leaves the first 1,247 rows of the day, in sale_id order, computed under v1.
    crashed_total = sum(amount(i, "v1") for i in ids[:CRASHED_ROWS])
    payouts.simulate_crash(wh.engine, DAY, table="payouts_naive")
    assert payouts.window_totals(wh.engine, "payouts_naive", DAY) == (CRASHED_ROWS, crashed_total)
    assert payouts.table_checksum(wh.engine, "payouts_naive") == payouts.rows_checksum(
        expected_rows(ids[:CRASHED_ROWS])
    )

    # The naive rerun appends: 3,247 rows / 486,745.80, then 5,247 / 786,475.80.
    _append_window(wh, "payouts_naive", DAY)
    assert payouts.window_totals(wh.engine, "payouts_naive", DAY) == (3247, Decimal("486745.80"))
    _append_window(wh, "payouts_naive", DAY)
    assert payouts.window_totals(wh.engine, "payouts_naive", DAY) == (5247, Decimal("786475.80"))
    count, total, _ = payouts.table_checksum(wh.engine, "payouts_naive")
    assert (count, total) == (5247, Decimal("786475.80"))


def test_policy_v2_window(warehouse) -> None:
    wh = warehouse
    payouts.create_sales(wh.engine)
    payouts.create_payouts(wh.engine)
    _append_window(wh, "payouts", DAY, policy="v2")
    expected = expected_rows(sale_ids(DAY), "v2")
    assert payouts.table_checksum(wh.engine, "payouts") == payouts.rows_checksum(expected)
    assert payouts.window_totals(wh.engine, "payouts", DAY) == (2000, sum(r[2] for r in expected))


def test_table_names_are_validated() -> None:
    engine = sa.create_engine("sqlite://")
    with pytest.raises(ValueError, match="plain identifier"):
        payouts.create_payouts(engine, "payouts; DROP TABLE sales")
    with pytest.raises(ValueError, match="plain identifier"):
        payouts.window_totals(engine, "payouts\n", DAY)
    with pytest.raises(ValueError, match="unsupported database dialect"):
        payouts.create_sales(SimpleNamespace(dialect=SimpleNamespace(name="mssql")))  # type: ignore[arg-type]


def test_payout_days_table_on_every_warehouse(warehouse) -> None:
    payouts.create_payout_days(warehouse.engine)
    payouts.create_payout_days(warehouse.engine)  # a second run finds it there
    with warehouse.engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO payout_days (sale_date, payouts, amount_eur) VALUES (:d, :n, :a)"),
            {"d": _d(warehouse, DAY), "n": 2000, "a": "299730.00"},
        )
        row = conn.execute(sa.text("SELECT payouts, amount_eur FROM payout_days")).one()
    assert (row[0], Decimal(row[1])) == (2000, Decimal("299730.00"))


def create_at_once(create: str, engine: sa.Engine, barrier: threading.Barrier, errors: list[str]) -> None:
    barrier.wait()
    try:
        getattr(payouts, create)(engine)
    except Exception as err:  # what the task would fail on
        errors.append(repr(err))


@pytest.mark.parametrize("create", ["create_payouts", "create_payout_days"])
def test_runs_starting_together_both_create_the_table(pg_url: str, create: str) -> None:
    """Two partitions' runs start at once: PostgreSQL does not serialise CREATE TABLE IF NOT EXISTS
    (one of them fails on pg_type's unique index in 19 of 20 rounds of 4 threads); each must succeed."""
    engine = sa.create_engine(pg_url, pool_size=4)
    table = "payouts" if create == "create_payouts" else "payout_days"
    failed_rounds = []
    try:
        for round_ in range(10):
            with engine.begin() as conn:
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
            barrier, errors = threading.Barrier(4), []

            threads = [
                threading.Thread(target=create_at_once, args=(create, engine, barrier, errors))
                for _ in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                failed_rounds.append((round_, errors[0]))
            with engine.connect() as conn:
                assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one() == 0
        assert failed_rounds == []
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()

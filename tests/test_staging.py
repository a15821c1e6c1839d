"""Stage, diff, swap on real databases: the payouts scenario under policy v1, then v2.

Every expected figure (how many rows v2 changes, by how much the total moves, what the window
holds after a swap or a repair) is computed here in pure Python from the scenario's formula,
never copied from the code under test. "Production unchanged" is the whole table's checksum
read by the scenario's independent oracle (`table_checksum`).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa
from sqlalchemy.pool import QueuePool

from airflow_idempotent.adapters import EngineAdapter, adapter_for
from airflow_idempotent.errors import MergeKeyError, RowsOutsideWindowError, SchemaError
from airflow_idempotent.examples.payouts import (
    PAYOUT_SQL,
    create_payouts,
    create_sales,
    rows_checksum,
    simulate_crash,
    table_checksum,
    window_totals,
)
from airflow_idempotent.guard import GuardRefusal, Thresholds
from airflow_idempotent.guard.diff import WindowDiff
from airflow_idempotent.guard.results import GuardBreach, GuardedResult
from airflow_idempotent.guard.write import guarded_write
from airflow_idempotent.lint import check_deterministic
from airflow_idempotent.strategies import merge, overwrite
from airflow_idempotent.window import Window
from airflow_idempotent.write_spec import WriteSpec
from tests.test_operators import DAY, PER_DAY, START, amount, day_truth

# --- the scenario's truth, in pure Python ---------------------------------------------------------

NEIGHBOURS = (DAY - timedelta(days=1), DAY + timedelta(days=1))


def sale_ids(day: date) -> range:
    first = (day - START).days * PER_DAY + 1
    return range(first, first + PER_DAY)


def price(i: int) -> Decimal:
    return Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")


def rate(i: int, policy: str) -> Decimal:
    return Decimal("0.55") if policy == "v2" and price(i) >= 400 else Decimal("0.60")


def truth_rows(day: date, policy: str, ids: Any = None) -> list[tuple[int, str, Decimal, Decimal]]:
    return [(i, day.isoformat(), amount(i, policy), rate(i, policy)) for i in (ids or sale_ids(day))]


def v2_changes(day: date) -> tuple[int, Decimal]:
    """Sales of the day that v2 pays differently (price >= 400) and the total they move by."""
    changed = [i for i in sale_ids(day) if price(i) >= 400]
    return len(changed), sum((amount(i, "v2") - amount(i, "v1") for i in changed), Decimal("0"))


def test_v2_truth_is_not_trivial() -> None:
    """The figures the tests rely on: v2 changes a real share of the day, and lowers the total."""
    changed, delta = v2_changes(DAY)
    assert 0 < changed < PER_DAY
    assert delta < 0
    assert day_truth(DAY, "v1")[1] + delta == day_truth(DAY, "v2")[1]


# --- helpers --------------------------------------------------------------------------------------


def window(day: date = DAY) -> Window:
    start = pendulum.datetime(day.year, day.month, day.day, tz="UTC")
    return Window(start, start.add(days=1), source="granularity")


def spec(
    adapter: EngineAdapter, policy: str = "v1", sql: str = PAYOUT_SQL, day: date = DAY, **kw: Any
) -> WriteSpec:
    return WriteSpec(
        table=kw.pop("table", "payouts"),
        query=check_deterministic(sql, adapter.dialect),
        window=window(day),
        partition_column=kw.pop("partition_column", "sale_date"),
        params=kw.pop("params", {"policy_version": policy}),
        **kw,
    )


def run(
    adapter: EngineAdapter,
    mode: str,
    policy: str = "v1",
    thresholds: Thresholds | None = None,
    sql: str = PAYOUT_SQL,
    **kw: Any,
) -> GuardedResult:
    return guarded_write(
        adapter,
        spec(adapter, policy, sql),
        ["sale_id"],
        ["amount_eur"],
        thresholds if thresholds is not None else Thresholds(),
        mode,  # type: ignore[arg-type]
        **kw,
    )


def money(value: Any) -> Decimal:
    """A sum as the database returned it (Decimal, or float on SQLite), to the cent."""
    return Decimal(repr(value) if isinstance(value, float) else value).quantize(Decimal("0.01"))


def sums(diff: WindowDiff, measure: str = "amount_eur") -> tuple[Decimal, Decimal]:
    before, after = diff.measures[measure]
    return money(before), money(after)


def window_rows(engine: sa.Engine, day: date, table: str = "payouts") -> tuple[int, Decimal, str]:
    """The window's content by the independent oracle: count, total, checksum of normalised rows."""
    day_param: Any = day.isoformat() if engine.dialect.name == "sqlite" else day
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT sale_id, sale_date, amount_eur, rate FROM {table} WHERE sale_date = :d"),
            {"d": day_param},
        ).all()
    return rows_checksum(rows)


def adapter_of(engine: sa.Engine) -> EngineAdapter:
    """The engine's adapter; pooled connections opened before it lack SQLite's hash function."""
    adapter = adapter_for(engine)
    engine.dispose()
    return adapter


COMPLETE = (
    "SELECT COUNT(*) = 2000 FROM sales s WHERE s.sale_date >= :window_start AND s.sale_date < :window_end"
)


@pytest.fixture
def loaded(warehouse: Any) -> Iterator[tuple[Any, EngineAdapter]]:
    """Sales, and payouts v1 for DAY and its two neighbours, written by the plain overwrite."""
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    adapter = adapter_of(warehouse.engine)
    for day in (DAY, *NEIGHBOURS):
        overwrite(adapter, spec(adapter, "v1", day=day))
    yield warehouse, adapter


# --- breaches(): the sentences, no database -------------------------------------------------------


def test_breaches_name_the_limit_and_the_figure() -> None:
    diff = WindowDiff(2000, 1880, 0, 120, 30, 1850, {"amount_eur": (Decimal("1000.00"), Decimal("900.00"))})
    t = Thresholds(
        max_changed_rows=29,
        max_removed_rows=100,
        max_added_rows=0,
        max_measure_abs_change={"amount_eur": 99.99},
        max_measure_rel_change={"amount_eur": 0.05},
        max_shrink=0.05,
    )
    assert diff.breaches(t) == [
        "changed 30 rows > max_changed_rows 29",
        "removed 120 rows > max_removed_rows 100",
        "amount_eur sum changed by 100.00 (1000.00 -> 900.00) > max_measure_abs_change 99.99",
        "amount_eur sum changed by 10.00% (1000.00 -> 900.00) > max_measure_rel_change 0.05",
        "new result has 1880 rows, 6.0% fewer than the existing 2000 > max_shrink 0.05",
    ]
    at_limits = Thresholds(
        max_changed_rows=30,
        max_removed_rows=120,
        max_measure_abs_change={"amount_eur": 100},
        max_measure_rel_change={"amount_eur": 0.1},
        max_shrink=0.07,
    )
    assert diff.breaches(at_limits) == []
    assert diff.breaches(Thresholds(max_shrink=None)) == []


def test_relative_change_from_zero_and_unknown_measures() -> None:
    rel = Thresholds(max_measure_rel_change={"amount_eur": 0.5}, max_shrink=None)
    from_zero = WindowDiff(0, 10, 10, 0, 0, 0, {"amount_eur": (Decimal(0), Decimal("12.50"))})
    assert from_zero.breaches(rel) == [
        "amount_eur sum changed from 0 to 12.50 (relative change unbounded) > max_measure_rel_change 0.5"
    ]
    zero_to_zero = WindowDiff(0, 0, 0, 0, 0, 0, {"amount_eur": (0.0, 0.0)})
    assert zero_to_zero.breaches(rel) == []
    assert zero_to_zero.breaches(Thresholds(max_shrink=0.0)) == []  # nothing to shrink from
    unknown = Thresholds(max_measure_abs_change={"bonus": 1.0}, max_shrink=None)
    assert zero_to_zero.breaches(unknown) == [
        "max_measure_abs_change names 'bonus', whose sum the diff did not compute"
    ]
    assert from_zero.to_json()["measures"] == {
        "amount_eur": {"before": "0", "after": "12.50", "delta": "12.50"}
    }
    assert from_zero.to_json()["row_delta"] == 10


def test_a_breach_survives_pickling_with_its_result() -> None:
    diff = WindowDiff(10, 10, 0, 0, 3, 7, {"amount_eur": (Decimal("1.00"), Decimal("2.00"))})
    result = GuardedResult(
        "swap", diff, False, None, None, ["changed 3 rows > max_changed_rows 2"], None, None
    )
    breach = pickle.loads(pickle.dumps(GuardBreach("stop condition ...", result)))
    assert isinstance(breach, GuardBreach) and str(breach) == "stop condition ..."
    assert breach.result == result
    assert result.as_dict()["diff"]["measures"]["amount_eur"]["delta"] == "1.00"


# --- corrective: stage, diff, swap ---------------------------------------------------------------


def test_corrective_swap_reports_the_exact_diff_and_writes_the_v2_truth(loaded: Any) -> None:
    wh, adapter = loaded
    others = [window_rows(wh.engine, d) for d in NEIGHBOURS]
    changed, delta = v2_changes(DAY)
    v1_total, v2_total = day_truth(DAY, "v1")[1], day_truth(DAY, "v2")[1]

    result = run(adapter, "swap", "v2", completeness_sql=check_deterministic(COMPLETE, adapter.dialect))

    diff = result.diff
    assert (diff.rows_before, diff.rows_after, diff.added, diff.removed) == (2000, 2000, 0, 0)
    assert (diff.changed, diff.unchanged) == (changed, 2000 - changed)
    assert sums(diff) == (v1_total, v2_total)
    assert sums(diff)[1] - sums(diff)[0] == delta
    assert result.swapped and result.breaches == [] and result.replay_matches is None
    assert (result.rows_deleted, result.rows_inserted, result.rows_updated) == (2000, 2000, 0)
    assert result.row_count == 2000
    assert window_totals(wh.engine, "payouts", DAY) == (2000, v2_total)
    assert window_rows(wh.engine, DAY) == rows_checksum(truth_rows(DAY, "v2"))
    assert [window_rows(wh.engine, d) for d in NEIGHBOURS] == others
    # the checksum is the one the plain writes record, so history compares like with like
    assert result.checksum == overwrite(adapter, spec(adapter, "v2")).checksum

    again = run(adapter, "swap", "v2")  # the same corrective run twice: an empty diff
    assert (again.diff.changed, again.diff.unchanged, again.diff.added, again.diff.removed) == (0, 2000, 0, 0)
    assert again.checksum == result.checksum


def test_threshold_breach_swaps_nothing_and_carries_the_diff(loaded: Any) -> None:
    wh, adapter = loaded
    before = table_checksum(wh.engine, "payouts")
    changed, delta = v2_changes(DAY)

    with pytest.raises(GuardBreach, match=rf"changed {changed} rows > max_changed_rows {changed - 1}") as err:
        run(adapter, "swap", "v2", Thresholds(max_changed_rows=changed - 1))
    result = err.value.result
    assert not result.swapped and result.checksum is None
    assert (result.diff.changed, result.diff.unchanged) == (changed, 2000 - changed)
    assert sums(result.diff)[1] - sums(result.diff)[0] == delta
    assert result.breaches == [f"changed {changed} rows > max_changed_rows {changed - 1}"]
    assert table_checksum(wh.engine, "payouts") == before

    limit = abs(delta) - 1
    with pytest.raises(GuardBreach, match=r"amount_eur sum changed by .* > max_measure_abs_change") as err:
        run(adapter, "reconcile", "v2", Thresholds(max_measure_abs_change={"amount_eur": float(limit)}))
    assert err.value.result.diff.changed == changed
    assert table_checksum(wh.engine, "payouts") == before

    # within the limits the same write goes through
    ok = run(
        adapter,
        "swap",
        "v2",
        Thresholds(max_changed_rows=changed, max_measure_abs_change={"amount_eur": float(-delta)}),
    )
    assert ok.swapped and window_totals(wh.engine, "payouts", DAY) == day_truth(DAY, "v2")


def test_shrink_guard_refuses_a_source_missing_40_percent(loaded: Any) -> None:
    wh, adapter = loaded
    before = table_checksum(wh.engine, "payouts")
    ids = sale_ids(DAY)
    with wh.engine.begin() as conn:  # 2 of every 5 sales of the day have not arrived
        conn.execute(
            sa.text("DELETE FROM sales WHERE sale_id >= :a AND sale_id <= :b AND sale_id % 5 IN (0, 1)"),
            {"a": ids[0], "b": ids[-1]},
        )
    missing = sum(1 for i in ids if i % 5 in (0, 1))
    assert missing == 800

    with pytest.raises(
        GuardBreach, match=r"1200 rows, 40\.0% fewer than the existing 2000 > max_shrink 0\.1"
    ):
        run(adapter, "swap", "v1")  # the default thresholds: max_shrink 10 %
    assert table_checksum(wh.engine, "payouts") == before

    with pytest.raises(GuardBreach) as err:
        run(adapter, "reconcile", "v1", Thresholds(max_shrink=0.5, max_removed_rows=799))
    diff = err.value.result.diff
    assert (diff.rows_before, diff.rows_after, diff.removed, diff.added, diff.changed) == (
        2000,
        1200,
        800,
        0,
        0,
    )
    kept = sum((amount(i) for i in ids if i % 5 not in (0, 1)), Decimal("0"))
    assert sums(diff) == (day_truth(DAY)[1], kept)
    assert err.value.result.breaches == ["removed 800 rows > max_removed_rows 799"]
    assert table_checksum(wh.engine, "payouts") == before


def test_incomplete_source_window_is_refused_before_anything(loaded: Any) -> None:
    wh, adapter = loaded
    with wh.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM sales WHERE sale_id = :i"), {"i": sale_ids(DAY)[7]})
    before = table_checksum(wh.engine, "payouts")
    completeness = check_deterministic(COMPLETE, adapter.dialect)
    for mode in ("swap", "reconcile", "replay"):
        with pytest.raises(GuardRefusal, match=r"source window incomplete: .* 2026-08-25 returned") as err:
            run(adapter, mode, "v1", expected_checksum="x", completeness_sql=completeness)
        assert not isinstance(err.value, GuardBreach)
        assert table_checksum(wh.engine, "payouts") == before
    # a check returning no row refuses too
    none = check_deterministic(f"{COMPLETE} HAVING COUNT(*) > 5000", adapter.dialect)
    with pytest.raises(GuardRefusal, match="returned no row"):
        run(adapter, "swap", "v1", completeness_sql=none)
    assert table_checksum(wh.engine, "payouts") == before


def test_staged_rows_are_checked_like_a_merge_source(loaded: Any) -> None:
    wh, adapter = loaded
    before = table_checksum(wh.engine, "payouts")
    ids = sale_ids(DAY)
    dup = f"{PAYOUT_SQL} UNION ALL {PAYOUT_SQL.replace('WHERE', f'WHERE s.sale_id = {ids[3]} AND')}"
    with pytest.raises(MergeKeyError, match=rf"duplicate key\(s\) {ids[3]} \(2 rows\)"):
        run(adapter, "swap", "v1", sql=dup)
    outside = f"{PAYOUT_SQL} OR s.sale_id = 1"
    with pytest.raises(RowsOutsideWindowError, match=r"outside the window 2026-08-25 .*2026-08-01"):
        run(adapter, "reconcile", "v1", sql=outside)
    assert table_checksum(wh.engine, "payouts") == before


def test_a_swap_names_bad_rows_the_database_refused_for_it(loaded: Any) -> None:
    """A swap where the database refuses repeated and NULL keys and rows outside the window
    (`swap_refuses_bad_rows`: PostgreSQL) runs no key pass; each refusal still names the keys or
    rows and leaves the table as it was, on every engine."""
    wh, adapter = loaded
    before = table_checksum(wh.engine, "payouts")
    ids = sale_ids(DAY)
    outside = f"{PAYOUT_SQL} OR s.sale_id = 1"
    outside_msg = r"produced 1 row\(s\) .*outside the window .*2026-08-01"
    with pytest.raises(RowsOutsideWindowError, match=outside_msg):
        run(adapter, "swap", "v1", sql=outside)
    null_key = PAYOUT_SQL.replace(
        "SELECT s.sale_id,", f"SELECT CASE WHEN s.sale_id = {ids[5]} THEN NULL ELSE s.sale_id END AS sale_id,"
    )
    with pytest.raises(MergeKeyError, match=r"NULL key\(s\) None \(1 rows\)"):
        run(adapter, "swap", "v1", sql=null_key)
    # a repeated key skews the diff (2,001 rows staged): the key is named, not the breach it causes
    dup = f"{PAYOUT_SQL} UNION ALL {PAYOUT_SQL.replace('WHERE', f'WHERE s.sale_id = {ids[7]} AND')}"
    with pytest.raises(MergeKeyError, match=rf"duplicate key\(s\) {ids[7]} \(2 rows\)"):
        run(adapter, "swap", "v2", Thresholds(max_changed_rows=0), sql=dup)
    assert table_checksum(wh.engine, "payouts") == before


def test_a_clean_swap_runs_the_key_pass_only_where_the_database_cannot_refuse(loaded: Any) -> None:
    wh, adapter = loaded
    passes: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "GROUP BY" in statement.upper():
            passes.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", seen)
    try:
        result = run(adapter, "swap", "v2")
        replayed = len(passes)
        run(adapter, "replay", "v2", expected_checksum=result.checksum)  # replay always checks
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", seen)
    assert result.rows_inserted == 2000 and window_totals(wh.engine, "payouts", DAY) == day_truth(DAY, "v2")
    assert replayed == (0 if wh.kind == "postgres" else 1)
    assert len(passes) == replayed + 1


def test_a_database_error_of_the_select_reaches_a_swap_unchanged(loaded: Any) -> None:
    wh, adapter = loaded
    if wh.kind != "postgres":
        pytest.skip("division by zero is an error in PostgreSQL's SELECT (NULL or a warning elsewhere)")
    before = table_checksum(wh.engine, "payouts")
    sql = PAYOUT_SQL.replace("s.price_eur *", f"s.price_eur / (s.sale_id - {sale_ids(DAY)[9]}) *")
    with pytest.raises(sa.exc.DataError, match="division by zero"):
        run(adapter, "swap", "v1", sql=sql)
    assert table_checksum(wh.engine, "payouts") == before


def test_a_target_without_a_unique_key_must_be_unique_in_the_window(loaded: Any) -> None:
    """Without a unique index the diff by key is only defined if the window has one row per key."""
    wh, adapter = loaded
    create_payouts(wh.engine, table="payouts_naive", keyed=False)
    naive = spec(adapter, "v1", table="payouts_naive")
    ok = guarded_write(adapter, naive, ["sale_id"], ["amount_eur"], Thresholds(), "swap")
    assert ok.swapped and ok.diff.added == 2000
    simulate_crash(wh.engine, DAY, rows=3, table="payouts_naive")  # an append run: 3 keys twice
    before = table_checksum(wh.engine, "payouts_naive")
    ids = sale_ids(DAY)
    with pytest.raises(SchemaError, match=rf"several rows per key .* \({ids[0]},\)"):
        guarded_write(adapter, naive, ["sale_id"], ["amount_eur"], Thresholds(), "swap")
    assert table_checksum(wh.engine, "payouts_naive") == before


# --- reconcile: repair only the difference --------------------------------------------------------


def in_list(ids: list[int]) -> str:
    return ",".join(str(int(i)) for i in ids)


def row_identity(engine: sa.Engine) -> str | None:
    """A physical row address that a DELETE+INSERT changes and an untouched row keeps, if any."""
    return {"postgresql": "ctid::text", "sqlite": "rowid", "duckdb": "rowid"}.get(engine.dialect.name)


def identities(engine: sa.Engine, ids: list[int]) -> dict[int, Any]:
    column = row_identity(engine)
    assert column is not None
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT sale_id, {column} FROM payouts WHERE sale_id IN ({in_list(ids)})")
        )
        return {int(r[0]): r[1] for r in rows}


def test_reconcile_repairs_a_damaged_window_touching_only_the_difference(loaded: Any) -> None:
    wh, adapter = loaded
    clean = table_checksum(wh.engine, "payouts")
    ids = list(sale_ids(DAY))
    deleted, altered, extra = ids[100:110], ids[500:505], [900_001, 900_002, 900_003]
    day: Any = DAY.isoformat() if wh.engine.dialect.name == "sqlite" else DAY
    with wh.engine.begin() as conn:
        conn.execute(sa.text(f"DELETE FROM payouts WHERE sale_id IN ({in_list(deleted)})"))
        conn.execute(
            sa.text(f"UPDATE payouts SET amount_eur = amount_eur + 1 WHERE sale_id IN ({in_list(altered)})")
        )
        for i in extra:
            conn.execute(
                sa.text(
                    "INSERT INTO payouts (sale_id, sale_date, amount_eur, rate) VALUES (:i, :d, 1.00, 0.60)"
                ),
                {"i": i, "d": day},
            )
    assert window_totals(wh.engine, "payouts", DAY)[0] == 2000 - 10 + 3
    untouched = [i for i in ids if i not in deleted and i not in altered][::97]
    identity_before = identities(wh.engine, untouched) if row_identity(wh.engine) else None

    result = run(adapter, "reconcile", "v1")

    diff = result.diff
    assert (diff.rows_before, diff.rows_after) == (1993, 2000)
    assert (diff.added, diff.removed, diff.changed, diff.unchanged) == (10, 3, 5, 1985)
    damaged_total = day_truth(DAY)[1] - sum((amount(i) for i in deleted), Decimal("0")) + 5 + 3
    assert sums(diff) == (damaged_total, day_truth(DAY)[1])
    # exactly 10 + 5 + 3 row operations, by the statements' own row counts
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (10, 5, 3)
    assert result.swapped and result.row_count == 2000
    assert table_checksum(wh.engine, "payouts") == clean
    if identity_before is not None:  # PostgreSQL ctid, SQLite and DuckDB rowid: never rewritten
        assert identities(wh.engine, untouched) == identity_before
    # a swap of the same window would rewrite every row; reconcile again finds nothing to do
    again = run(adapter, "reconcile", "v1")
    assert (again.rows_inserted, again.rows_updated, again.rows_deleted) == (0, 0, 0)
    assert again.diff.unchanged == 2000
    if identity_before is not None:  # the identity check has teeth: a swap rewrites every row
        run(adapter, "swap", "v1")
        after_swap = identities(wh.engine, untouched)
        assert all(after_swap[i] != identity_before[i] for i in untouched)


def test_reconcile_compares_nulls_as_values(warehouse: Any) -> None:
    """NULL = NULL is unknown in SQL: the diff must still call NULL -> NULL unchanged."""
    engine = warehouse.engine
    adapter = adapter_of(engine)
    with engine.begin() as conn:
        for table in ("notes", "notes_src"):
            conn.execute(
                sa.text(
                    f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, day DATE NOT NULL, "
                    "note VARCHAR(10), amt DECIMAL(10,2))"
                )
            )
        conn.execute(
            sa.text(
                "INSERT INTO notes (id, day, note, amt) VALUES (1, '2026-08-25', NULL, NULL), "
                "(2, '2026-08-25', NULL, 1.00), (3, '2026-08-25', 'a', 2.00), (4, '2026-08-25', 'a', 3.00), "
                "(5, '2026-08-24', NULL, 9.00)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO notes_src (id, day, note, amt) VALUES (1, '2026-08-25', NULL, NULL), "
                "(2, '2026-08-25', 'x', 1.00), (3, '2026-08-25', NULL, 2.00), (4, '2026-08-25', 'a', 3.00), "
                "(5, '2026-08-24', 'y', 1.00)"
            )
        )
    sql = "SELECT id, day, note, amt FROM notes_src WHERE day >= :window_start AND day < :window_end"
    result = guarded_write(
        adapter,
        spec(adapter, sql=sql, table="notes", partition_column="day", params={}),
        ["id"],
        ["amt"],
        Thresholds(),
        "reconcile",
    )
    assert (result.diff.changed, result.diff.unchanged, result.diff.added, result.diff.removed) == (
        2,
        2,
        0,
        0,
    )
    assert (result.rows_updated, result.rows_inserted, result.rows_deleted) == (2, 0, 0)
    assert [money(x) for x in result.diff.measures["amt"]] == [Decimal("6.00"), Decimal("6.00")]
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, note FROM notes ORDER BY id")).all()
    assert [tuple(r) for r in rows] == [(1, None), (2, "x"), (3, None), (4, "a"), (5, None)]


# --- replay: reproduce, never change --------------------------------------------------------------


def test_replay_reproduces_the_recorded_checksum_and_never_writes(loaded: Any) -> None:
    wh, adapter = loaded
    recorded = overwrite(adapter, spec(adapter, "v1")).checksum  # what history recorded for v1
    assert recorded
    run(adapter, "swap", "v2")  # a corrective backfill since: production now holds v2
    production = table_checksum(wh.engine, "payouts")
    changed, _ = v2_changes(DAY)

    same = run(adapter, "replay", "v1", expected_checksum=recorded, thresholds=Thresholds(max_changed_rows=0))
    assert same.replay_matches is True and same.checksum == recorded and same.expected_checksum == recorded
    assert not same.swapped and (same.rows_deleted, same.rows_inserted, same.rows_updated) == (0, 0, 0)
    assert same.diff.changed == changed  # v1 staged against v2 in production
    assert same.breaches == [f"changed {changed} rows > max_changed_rows 0"]  # reported, not enforced
    assert table_checksum(wh.engine, "payouts") == production

    other = run(adapter, "replay", "v2", expected_checksum=recorded)
    assert other.replay_matches is False and other.checksum != recorded
    assert table_checksum(wh.engine, "payouts") == production

    with pytest.raises(GuardRefusal, match="compares with the checksum recorded"):
        run(adapter, "replay", "v1", expected_checksum=None)


# --- the kill switch's moment: before commit -------------------------------------------------------


def test_before_commit_raising_commits_nothing(loaded: Any) -> None:
    wh, adapter = loaded
    before = table_checksum(wh.engine, "payouts")
    calls: list[str] = []

    def stop() -> None:
        calls.append("checked")
        raise GuardRefusal("kill switch on")

    for mode in ("swap", "reconcile"):
        with pytest.raises(GuardRefusal, match="kill switch on"):
            run(adapter, mode, "v2", before_commit=stop)
        assert table_checksum(wh.engine, "payouts") == before
    # the spec's own before_commit is the default
    with pytest.raises(GuardRefusal, match="kill switch on"):
        guarded_write(adapter, spec(adapter, "v2", before_commit=stop), ["sale_id"], [], Thresholds(), "swap")
    assert calls == ["checked"] * 3
    assert table_checksum(wh.engine, "payouts") == before


# --- no staging table outlives its write --------------------------------------------------------


def test_no_staging_table_outlives_its_write(warehouse: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pooled connection, reused: a temporary table left behind would still be visible on it."""
    engine = sa.create_engine(warehouse.url, poolclass=QueuePool, pool_size=1, max_overflow=0)
    try:
        create_sales(engine)
        create_payouts(engine)
        adapter = adapter_of(engine)
        names = iter(f"_idem_stg_probe{n}" for n in range(10))
        used: list[str] = []

        def name() -> str:
            used.append(next(names))
            return used[-1]

        monkeypatch.setattr("airflow_idempotent.guard.write.staging_name", name)

        def fail() -> None:
            raise RuntimeError("stop")

        run(adapter, "swap", "v1")  # committed
        with pytest.raises(GuardBreach):
            run(adapter, "swap", "v2", Thresholds(max_changed_rows=0))
        with pytest.raises(RuntimeError):
            run(adapter, "reconcile", "v2", before_commit=fail)
        assert run(adapter, "replay", "v2", expected_checksum="x").replay_matches is False
        with pytest.raises(RowsOutsideWindowError):
            run(adapter, "swap", "v1", sql=f"{PAYOUT_SQL} OR s.sale_id = 1")
        assert len(used) == 5
        for table in used:
            with engine.connect() as conn, pytest.raises(sa.exc.DBAPIError):
                conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}"))
        assert window_totals(engine, "payouts", DAY) == day_truth(DAY, "v1")
    finally:
        engine.dispose()


def test_an_overwrite_or_swap_that_breaks_the_tables_key_names_the_keys(loaded: Any) -> None:
    """The target's primary key refuses a repeated key, a NULL key, or a key the table holds in
    another window (the window's DELETE leaves that row in place); after the rollback each is
    named with the fix, on every engine, and the table is as it was. A NOT NULL break that is
    no key's reaches the caller as the database's own error."""
    wh, adapter = loaded
    before = table_checksum(wh.engine, "payouts")
    ids = sale_ids(DAY)
    neighbour = NEIGHBOURS[0]
    held = sale_ids(neighbour)[0]  # loaded into payouts on the day before
    dup = f"{PAYOUT_SQL} UNION ALL {PAYOUT_SQL.replace('WHERE', f'WHERE s.sale_id = {ids[3]} AND')}"

    def key_as(value: str) -> str:
        return PAYOUT_SQL.replace(
            "SELECT s.sale_id,",
            f"SELECT CASE WHEN s.sale_id = {ids[5]} THEN {value} ELSE s.sale_id END AS sale_id,",
        )

    cases = [
        (dup, MergeKeyError, rf"duplicate key\(s\) {ids[3]} \(2 rows\) on \(sale_id\)"),
        (key_as("NULL"), MergeKeyError, r"NULL key\(s\) None \(1 rows\) on \(sale_id\)"),
        (
            key_as(str(held)),
            MergeKeyError,
            rf"payouts already holds outside the window 2026-08-25, e.g. {held} \(sale_date {neighbour}\)"
            r".*lookback",
        ),
    ]
    for sql, error, message in cases:
        with pytest.raises(error, match=message):
            overwrite(adapter, spec(adapter, "v1", sql))
        with pytest.raises(error, match=message):
            run(adapter, "swap", "v1", sql=sql)
    assert table_checksum(wh.engine, "payouts") == before
    null_amount = PAYOUT_SQL.replace(
        "ROUND(s.price_eur", f"CASE WHEN s.sale_id = {ids[2]} THEN NULL ELSE ROUND(s.price_eur"
    ).replace(" AS amount_eur, ", " END AS amount_eur, ")
    with pytest.raises(sa.exc.IntegrityError):
        overwrite(adapter, spec(adapter, "v1", null_amount))
    assert table_checksum(wh.engine, "payouts") == before


def test_a_merge_does_not_move_a_row_out_of_another_window(loaded: Any) -> None:
    """A merge of one window whose SELECT carries a key the table holds on another day would update
    that row into this window: a change to a window this write neither locks nor records. The
    upsert refuses it in the statement (`stay_in_window`, on every engine), the key and the day
    that holds it are named, and the table is as it was; over a window that spans both days the
    same move is the write's own and goes through."""
    wh, adapter = loaded
    before = table_checksum(wh.engine, "payouts")
    ids = sale_ids(DAY)
    neighbour = NEIGHBOURS[0]
    held = sale_ids(neighbour)[0]
    carries = PAYOUT_SQL.replace(
        "SELECT s.sale_id,",
        f"SELECT CASE WHEN s.sale_id = {ids[5]} THEN {held} ELSE s.sale_id END AS sale_id,",
    )
    message = rf"payouts already holds outside the window 2026-08-25, e.g. {held} \(sale_date {neighbour}\)"
    for delete_missing in (False, True):
        with pytest.raises(MergeKeyError, match=message + r".*lookback"):
            merge(adapter, spec(adapter, "v2", carries), ["sale_id"], delete_missing=delete_missing)
    assert table_checksum(wh.engine, "payouts") == before
    # the window spans the neighbour and DAY: moving `held` to DAY stays inside it
    day_of = f"(SELECT MIN(x.sale_date) FROM sales x WHERE x.sale_id = {ids[0]})"
    moves = PAYOUT_SQL.replace(
        "SELECT s.sale_id, s.sale_date,",
        f"SELECT s.sale_id, CASE WHEN s.sale_id = {held} THEN {day_of} ELSE s.sale_date END AS sale_date,",
    )
    start = window(neighbour).start
    both = dataclasses.replace(
        spec(adapter, "v1", moves, day=neighbour),
        window=Window(start, start.add(days=2), source="granularity"),
    )
    result = merge(adapter, both, ["sale_id"])
    assert (result.source_rows, result.rows_inserted) == (2 * PER_DAY, 0)
    assert window_rows(wh.engine, neighbour)[0] == PER_DAY - 1
    assert window_rows(wh.engine, DAY)[0] == PER_DAY + 1

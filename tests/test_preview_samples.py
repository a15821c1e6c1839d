"""`preview_write`'s counts and sample keys on every SQL warehouse, against figures computed here.

The preview answers a sample kind its diff counted none of without a query (`empty_kinds`); these
tests hold the answers to what plain Python says the rows are: first 10 keys changed, added and
removed, by key order, including a target whose window repeats a key (where the diff's `added`
count alone cannot prove that nothing was added).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.errors import MergeKeyError, RowsOutsideWindowError
from airflow_idempotent.guard.diff import KEY_SAMPLE_SIZE, WindowDiff, empty_kinds
from airflow_idempotent.lint import check_deterministic
from airflow_idempotent.preview import preview_write
from airflow_idempotent.window import Window
from airflow_idempotent.write_spec import WriteSpec

DAY = date(2026, 8, 25)
OTHER_DAY = date(2026, 8, 24)
SQL = "SELECT id, day, amt FROM src WHERE day >= :window_start AND day < :window_end"

Rows = list[tuple[int, date, Decimal]]


def load(engine: sa.Engine, target: Rows, source: Rows, keyed: bool = True) -> None:
    key = " PRIMARY KEY" if keyed else ""
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE tgt (id BIGINT{key}, day DATE NOT NULL, amt DECIMAL(10,2))"))
        conn.execute(sa.text("CREATE TABLE src (id BIGINT, day DATE NOT NULL, amt DECIMAL(10,2))"))
        for table, rows in (("tgt", target), ("src", source)):
            if rows:
                conn.execute(
                    sa.text(f"INSERT INTO {table} (id, day, amt) VALUES (:i, :d, :a)"),
                    [{"i": i, "d": d.isoformat(), "a": str(a)} for i, d, a in rows],
                )


def preview(engine: sa.Engine, sql: str = SQL) -> Any:
    adapter = adapter_for(engine)
    engine.dispose()  # pooled connections opened before the adapter lack SQLite's hash function
    start = pendulum.datetime(DAY.year, DAY.month, DAY.day, tz="UTC")
    spec = WriteSpec(
        table="tgt",
        query=check_deterministic(sql, adapter.dialect),
        window=Window(start, start.add(days=1), source="granularity"),
        partition_column="day",
        params={},
    )
    return preview_write(adapter, spec, ["id"], ["amt"])


def expected(target: Rows, source: Rows) -> dict[str, list[int]]:
    """The first keys of each kind, by plain Python over the window's rows (target keys may repeat)."""
    before = [(i, a) for i, d, a in target if d == DAY]
    after = {i: a for i, d, a in source if d == DAY}
    target_keys = {i for i, _ in before}
    return {
        "changed": sorted({i for i, a in before if i in after and after[i] != a})[:KEY_SAMPLE_SIZE],
        "added": sorted(i for i in after if i not in target_keys)[:KEY_SAMPLE_SIZE],
        "removed": sorted(i for i, _ in before if i not in after)[:KEY_SAMPLE_SIZE],
    }


def test_empty_kinds_trusts_added_only_with_unique_target_keys() -> None:
    diff = WindowDiff(rows_before=3, rows_after=3, added=0, removed=0, changed=0, unchanged=3)
    assert empty_kinds(diff, target_keys_unique=True) == {"changed", "added", "removed"}
    assert empty_kinds(diff, target_keys_unique=False) == {"changed", "removed"}
    some = WindowDiff(rows_before=3, rows_after=4, added=1, removed=0, changed=2, unchanged=1)
    assert empty_kinds(some, target_keys_unique=True) == {"removed"}


def test_samples_and_counts_of_changed_added_and_removed_rows(warehouse: Any) -> None:
    target = [(i, DAY, Decimal(i)) for i in range(1, 31)] + [(100, OTHER_DAY, Decimal(1))]
    source = [(i, DAY, Decimal(i) + (1 if i in (6, 7, 8) else 0)) for i in range(6, 46)]
    load(warehouse.engine, target, source)
    got = preview(warehouse.engine)
    assert got.diff is not None
    assert (got.diff.changed, got.diff.added, got.diff.removed, got.diff.unchanged) == (3, 15, 5, 22)
    assert {kind: [int(k[0]) for k in keys] for kind, keys in got.samples.items()} == expected(target, source)
    assert got.samples["added"] and len(got.samples["added"]) == KEY_SAMPLE_SIZE


def test_an_unchanged_window_samples_nothing(warehouse: Any) -> None:
    rows = [(i, DAY, Decimal(i)) for i in range(1, 21)]
    load(warehouse.engine, [*rows, (100, OTHER_DAY, Decimal(5))], rows)
    got = preview(warehouse.engine)
    assert got.diff is not None and (got.diff.changed, got.diff.added, got.diff.removed) == (0, 0, 0)
    assert got.samples == {"changed": [], "added": [], "removed": []}
    assert got.unchanged


def test_a_repeated_target_key_does_not_hide_an_added_row(warehouse: Any) -> None:
    """Target window {1, 1, 2} without a unique key, staged {1, 2, 3}: the diff's added count is
    3 staged - 3 matched pairs = 0, yet key 3 is new; its sample must still name it."""
    target = [(1, DAY, Decimal(1)), (1, DAY, Decimal(1)), (2, DAY, Decimal(2))]
    source = [(1, DAY, Decimal(1)), (2, DAY, Decimal(2)), (3, DAY, Decimal(3))]
    load(warehouse.engine, target, source, keyed=False)
    got = preview(warehouse.engine)
    assert got.diff is not None and got.diff.added == 0  # the count's blind spot, as documented
    want = expected(target, source)
    assert want["added"] == [3]
    assert {kind: [int(k[0]) for k in keys] for kind, keys in got.samples.items()} == want


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_sums_given_to_the_diff_are_the_ones_it_reports(warehouse: Any) -> None:
    """The preview hands its own window sums to the guard's diff: both report the same figures."""
    target = [(i, DAY, Decimal(i)) for i in range(1, 11)]
    source = [(i, DAY, Decimal(2 * i)) for i in range(1, 11)]
    load(warehouse.engine, target, source)
    got = preview(warehouse.engine)
    assert got.diff is not None
    assert (got.diff.rows_before, got.diff.rows_after) == (got.rows_before, got.rows_after) == (10, 10)
    before, after = got.diff.measures["amt"]
    assert (Decimal(str(before)), Decimal(str(after))) == (Decimal(55), Decimal(110))


def test_staged_rows_are_refused_as_the_write_refuses_them(warehouse: Any) -> None:
    """Repeated and NULL keys, and rows outside the window, raise before any diff, naming them."""
    engine = warehouse.engine
    good = [(i, DAY, Decimal(i)) for i in range(1, 6)]
    # a target without a primary key: its staging's key column takes a NULL on every engine
    load(engine, good, [*good, (3, DAY, Decimal(9)), (None, DAY, Decimal(1))], keyed=False)  # type: ignore[list-item]
    with pytest.raises(MergeKeyError, match=r"duplicate key\(s\) 3 \(2 rows\)") as err:
        preview(engine)
    assert "NULL key(s)" in str(err.value)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM src WHERE id IS NULL OR amt = 9"))
        conn.execute(
            sa.text("INSERT INTO src (id, day, amt) VALUES (7, :d, 7)"), {"d": OTHER_DAY.isoformat()}
        )
    assert preview(engine).diff.added == 0  # the window's own SELECT leaves the other day out
    with pytest.raises(RowsOutsideWindowError):
        preview(engine, "SELECT id, day, amt FROM src")

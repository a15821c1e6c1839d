"""A merge's inserted and updated rows on MariaDB: counted by the upsert's own guard in
LAST_INSERT_ID (`MySQLAdapter.counts_updates`) instead of a count of the window before it, and by
that count where an AUTO_INCREMENT column sets LAST_INSERT_ID itself. Each figure is checked
against the keys counted by hand-written SQL; the guard set on a key column still refuses a move
out of another window, and the SELECT loses its derived table only where that changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent import strategies, write_spec
from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.adapters.base import SOURCE_ALIAS
from airflow_idempotent.errors import MergeKeyError
from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payouts, create_sales, simulate_crash
from airflow_idempotent.lint import check_deterministic
from airflow_idempotent.window import day_range
from tests.test_merge_inserted import merge_counting, new_keys
from tests.test_operators import DAY, PER_DAY, context, make

pytestmark = pytest.mark.parametrize("warehouse", ["mariadb"], indirect=True)

#: The window's keys the table held before the merge (`simulate_crash`'s first rows of the day).
HELD = 1247
#: Rows of other days the merge must leave alone (their keys are not the day's).
ELSEWHERE = "INSERT INTO payouts VALUES (-1, '2026-08-24', 1, 1), (-2, '2026-08-26', 2, 2)"


def merged(warehouse: Any, held: int, ddl: str | None = None) -> tuple[dict[str, Any], list[str], int]:
    """Create payouts (by `ddl`, else the example's), hold `held` rows of the day and two of other
    days, merge the day; the result, the statements counting payouts without hashing, and the
    keys payouts lacked."""
    create_sales(warehouse.engine)
    if ddl is None:
        create_payouts(warehouse.engine)
    else:
        with warehouse.engine.begin() as conn:
            conn.execute(sa.text(ddl))
    simulate_crash(warehouse.engine, DAY, rows=held)
    with warehouse.engine.begin() as conn:
        conn.execute(
            sa.text(
                ELSEWHERE
                if ddl is None
                else ELSEWHERE.replace("VALUES", "(sale_id, sale_date, amount_eur, rate) VALUES")
            )
        )
    lacking = new_keys(warehouse.engine)
    result, counts = merge_counting(["sale_id"], "`PAYOUTS`", "CRC32")
    return result, counts, lacking


@pytest.mark.parametrize("held", [0, HELD, PER_DAY])
def test_the_upsert_counts_its_updates_without_a_count_of_the_window(warehouse: Any, held: int) -> None:
    result, counts, lacking = merged(warehouse, held)
    assert lacking == PER_DAY - held
    assert (result["rows_inserted"], result["rows_updated"]) == (lacking, PER_DAY - lacking)
    assert counts == []  # LAST_INSERT_ID counted the updates; the checksum counts the window after
    with warehouse.engine.connect() as conn:
        others = conn.execute(sa.text("SELECT sale_id, amount_eur FROM payouts WHERE sale_id < 0 ORDER BY 1"))
        assert [tuple(r) for r in others] == [(-2, 2), (-1, 1)]


def test_an_auto_increment_column_keeps_the_count_of_the_window(warehouse: Any) -> None:
    """Inserting rows that take AUTO_INCREMENT values sets the statement's insert id to the first
    of them, which would read as the updated rows: the window is counted instead."""
    ddl = (
        "CREATE TABLE payouts (id BIGINT NOT NULL AUTO_INCREMENT UNIQUE, sale_id BIGINT NOT NULL PRIMARY "
        "KEY, sale_date DATE NOT NULL, amount_eur DECIMAL(12,2) NOT NULL, rate DECIMAL(4,2) NOT NULL, "
        "INDEX ix_payouts_sale_date (sale_date))"
    )
    result, counts, lacking = merged(warehouse, HELD, ddl)
    assert lacking == PER_DAY - HELD
    assert (result["rows_inserted"], result["rows_updated"]) == (lacking, PER_DAY - lacking)
    assert len(counts) == 1  # the window counted before the upsert


def test_a_varchar_key_keeps_the_guard_on_the_partition_column_and_refuses_a_move(warehouse: Any) -> None:
    """No integer key to carry the guard: it stays on the partition column, counts there, and
    still refuses to move key 'b' out of the day before; key 'a' alone merges as one update."""
    adapter = adapter_for(warehouse.engine)
    with warehouse.engine.begin() as conn:
        for table in ("idem_win", "idem_src"):
            conn.execute(
                sa.text(
                    f"CREATE TABLE {table} (k VARCHAR(8) NOT NULL PRIMARY KEY, d DATE NOT NULL, v INTEGER)"
                )
            )
        conn.execute(sa.text("INSERT INTO idem_win VALUES ('a', '2026-08-25', 1), ('b', '2026-08-24', 1)"))
        conn.execute(
            sa.text(
                "INSERT INTO idem_src VALUES "
                "('a', '2026-08-25', 5), ('b', '2026-08-25', 5), ('c', '2026-08-25', 5)"
            )
        )
    window = day_range(DAY, DAY)

    def merge_of(sql: str) -> write_spec.WriteResult:
        spec = write_spec.WriteSpec("idem_win", check_deterministic(sql, adapter.dialect), window, "d")
        return strategies.merge(adapter, spec, ["k"])

    with pytest.raises(MergeKeyError, match=r"holds outside the window 2026-08-25, e\.g\. b \(d 2026-08-24"):
        merge_of("SELECT k, d, v FROM idem_src")
    result = merge_of("SELECT k, d, v FROM idem_src WHERE k <> 'b'")
    assert (result.source_rows, result.rows_inserted, result.rows_updated) == (2, 1, 1)
    with warehouse.engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(sa.text("SELECT k, v FROM idem_win ORDER BY k"))]
    assert rows == [("a", 5), ("b", 1), ("c", 5)]


def test_the_select_is_inserted_without_its_derived_table_only_where_that_changes_nothing(
    warehouse: Any,
) -> None:
    adapter = adapter_for(warehouse.engine)
    plain = adapter.render(
        adapter.insert_select("payouts", ["sale_id"], check_deterministic(PAYOUT_SQL, "mysql"))
    )
    assert SOURCE_ALIAS not in plain and plain.startswith(
        "INSERT INTO `payouts` (`sale_id`) SELECT s.sale_id"
    )
    for sql in (
        "SELECT sale_id FROM PAYOUTS WHERE sale_date >= :window_start",  # reads the target itself
        "SELECT s.sale_id FROM sales s GROUP BY s.sale_id",
        "SELECT DISTINCT s.sale_id FROM sales s",
        "WITH w AS (SELECT sale_id FROM sales) SELECT sale_id FROM w",
        "SELECT sale_id FROM sales UNION ALL SELECT sale_id FROM sales",
    ):
        wrapped = adapter.render(
            adapter.insert_select("payouts", ["sale_id"], check_deterministic(sql, "mysql"))
        )
        assert f"AS {SOURCE_ALIAS}" in wrapped, sql


def test_a_merge_reading_its_own_target_updates_every_row(warehouse: Any) -> None:
    """The source reads payouts itself (a correction of the day): the derived table stays, the
    guard's `payouts.sale_date` names the target, and every row is one update."""
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    simulate_crash(warehouse.engine, DAY, rows=HELD)
    sql = (
        "SELECT p.sale_id, p.sale_date, p.amount_eur + 1 AS amount_eur, p.rate FROM payouts p "
        "WHERE p.sale_date >= :window_start AND p.sale_date < :window_end"
    )
    result = make("merge", key_columns=["sale_id"], sql=sql).execute(context())
    assert (result["rows_inserted"], result["rows_updated"]) == (0, HELD)
    with warehouse.engine.connect() as conn:
        low = conn.execute(sa.text("SELECT MIN(amount_eur) FROM payouts")).scalar_one()
    assert low >= 1

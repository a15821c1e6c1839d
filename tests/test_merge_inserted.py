"""A merge's inserted and updated rows on PostgreSQL: from the transaction's own insert counter
(`inserted_so_far`) instead of a count of the window before the upsert, and by that count where
the counter could mislead (a partitioned target, a trigger adding rows to the table,
statistics off). Each figure is checked against the keys counted by hand-written SQL."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.errors import SchemaError
from airflow_idempotent.examples.payouts import create_payouts, create_sales, simulate_crash
from tests.test_operators import DAY, PER_DAY, context, make

pytestmark = pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)

#: The window's keys the table held before the merge (`simulate_crash`'s first rows of the day).
HELD = 1247

#: A target the counter would misread: its trigger adds a row outside the window per row inserted.
AUDITED = [
    """CREATE FUNCTION payouts_audit() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN INSERT INTO payouts VALUES (-NEW.sale_id, NEW.sale_date - 1000, 0, 0); RETURN NULL; END $$""",
    "CREATE TRIGGER payouts_audit AFTER INSERT ON payouts FOR EACH ROW WHEN (NEW.sale_id > 0) "
    "EXECUTE FUNCTION payouts_audit()",
]
#: A partitioned target (its own counter counts nothing; the partition's does).
PARTITIONED = [
    "CREATE TABLE payouts (sale_id BIGINT NOT NULL, sale_date DATE NOT NULL, amount_eur DECIMAL(12,2) "
    "NOT NULL, rate DECIMAL(4,2) NOT NULL, PRIMARY KEY (sale_id, sale_date)) PARTITION BY RANGE (sale_date)",
    "CREATE TABLE payouts_2026 PARTITION OF payouts FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
]


def statements(engine: sa.Engine, sql: list[str]) -> None:
    with engine.begin() as conn:
        for one in sql:
            conn.execute(sa.text(one))


def new_keys(engine: sa.Engine) -> int:
    """The day's sales whose key the window does not hold yet: what the merge inserts."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM sales s WHERE s.sale_date = :day "
                    "AND NOT EXISTS (SELECT 1 FROM payouts p WHERE p.sale_id = s.sale_id)"
                ),
                {"day": DAY},
            ).scalar_one()
        )


def merged(warehouse: Any, setup: list[str], keys: list[str]) -> tuple[dict[str, Any], list[str], int]:
    """Set up payouts by `setup` (created plainly if empty), hold HELD rows, merge the day; the
    result, the statements counting payouts' rows without hashing them, and the keys it lacked."""
    create_sales(warehouse.engine)
    if setup[:1] == PARTITIONED[:1]:
        statements(warehouse.engine, setup)
    else:
        create_payouts(warehouse.engine)
    simulate_crash(warehouse.engine, DAY, rows=HELD)
    if setup[:1] != PARTITIONED[:1]:
        statements(warehouse.engine, setup)
    lacking = new_keys(warehouse.engine)
    result, counts = merge_counting(keys, '"PAYOUTS"', "HASH")
    return result, counts, lacking


def merge_counting(keys: list[str], table: str, hashed: str) -> tuple[dict[str, Any], list[str]]:
    """Merge the day on `keys`; its result and the statements counting `table` (quoted, upper
    case) without `hashed` (the checksum's hash function) in them: the window counts."""
    counts: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        text = " ".join(statement.split()).upper()
        if text.startswith("SELECT COUNT(*)") and table in text and hashed not in text:
            counts.append(text)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", seen)
    try:
        result = make("merge", key_columns=keys).execute(context())
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", seen)
    return result, counts


def test_a_plain_table_counts_its_inserts_without_a_count_of_the_window(warehouse: Any) -> None:
    result, counts, lacking = merged(warehouse, [], ["sale_id"])
    assert lacking == PER_DAY - HELD
    assert (result["rows_inserted"], result["rows_updated"]) == (lacking, PER_DAY - lacking)
    assert counts == []  # the transaction's counter, read twice, replaced the window's count


@pytest.mark.parametrize(
    "setup, keys",
    [(AUDITED, ["sale_id"]), (PARTITIONED, ["sale_id", "sale_date"])],
    ids=["trigger", "partitioned"],
)
def test_a_target_whose_counter_would_mislead_counts_the_window(
    warehouse: Any, setup: list[str], keys: list[str]
) -> None:
    result, counts, lacking = merged(warehouse, setup, keys)
    assert lacking == PER_DAY - HELD
    assert (result["rows_inserted"], result["rows_updated"]) == (lacking, PER_DAY - lacking)
    assert len(counts) == 1  # the window counted before the upsert (after: the checksum's count)


def test_the_counter_counts_inserts_and_is_not_read_once_it_could_mislead(warehouse: Any) -> None:
    """Two rows inserted read as two; statistics off reads as none; a trigger added after the
    first read refuses the count, nothing written."""
    create_payouts(warehouse.engine)
    adapter = adapter_for(warehouse.engine)
    with warehouse.engine.begin() as conn:
        info = adapter.describe(conn, "payouts")
        first = adapter.inserted_so_far(conn, info)
        conn.execute(sa.text("INSERT INTO payouts VALUES (1, '2026-08-25', 1, 1), (2, '2026-08-25', 1, 1)"))
        assert first is not None and adapter.inserted_since(conn, info, first) == 2
        conn.execute(sa.text("SET LOCAL track_counts = off"))
        assert adapter.inserted_so_far(conn, info) is None
    with warehouse.engine.connect() as conn, conn.begin():
        first = adapter.inserted_so_far(conn, info)
        assert first is not None
        for one in AUDITED:
            conn.execute(sa.text(one))
        with pytest.raises(SchemaError, match=r"payouts changed during the write .* nothing was written"):
            adapter.inserted_since(conn, info, first)

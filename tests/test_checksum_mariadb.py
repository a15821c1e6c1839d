"""MariaDB's window checksum (v2) against an oracle computed here, from the rows, with zlib.

The definition (docs/checksum.md): `v2:<rows>:<sum>`, the sum over the window's rows of
CRC32 of the row's text form, columns in case-insensitive name order, joined by '|', NULL written
'<null>'. The oracle reads the rows with a plain SELECT and builds that text in Python, so a test
compares the adapter's SQL with figures it did not compute. Since NOT NULL columns skip their
COALESCE, the checksum must equal the one the former expression (COALESCE on every column) wrote:
a window recorded before is compared with, and is the same dataset version.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa
from sqlglot import exp

from airflow_idempotent.adapters.base import ColumnInfo
from airflow_idempotent.adapters.mysql import MySQLAdapter
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.window import Window
from tests.conftest import scratch_tables
from tests.test_history_writes import history, loaded, run_ctx  # noqa: F401 (fixtures)
from tests.test_operators import make

DAY = date(2026, 8, 25)
TABLE = """
CREATE TABLE idem_ck (
    id BIGINT NOT NULL PRIMARY KEY, day DATE NOT NULL, i INT NULL, u BIGINT UNSIGNED NULL,
    n DECIMAL(12, 2) NULL, wide DECIMAL(65, 30) NULL, s VARCHAR(40) NULL,
    l VARCHAR(20) CHARACTER SET latin1 NOT NULL DEFAULT 'x', ts DATETIME NULL, Mixed INT NOT NULL DEFAULT 0
) CHARACTER SET utf8mb4
"""
COLUMNS = ("id", "day", "i", "u", "n", "wide", "s", "l", "ts", "Mixed")
ROWS: list[tuple[Any, ...]] = [
    (1, DAY, 0, 0, Decimal("0.00"), Decimal("0"), "", "x", datetime(2026, 8, 25, 1, 2, 3), 0),
    (2, DAY, None, None, None, None, None, "é", None, 7),
    (
        3,
        DAY,
        -2147483648,
        18446744073709551615,
        Decimal("-9999999999.99"),
        Decimal("1" * 35 + "." + "9" * 30),
        "naïve — ü",
        "ÿ",
        datetime(2026, 8, 25, 23, 59, 59),
        -1,
    ),
    (4, DAY, 2147483647, 1, Decimal("1.50"), Decimal("-0.000000000000000000000000000001"), "0", "", None, 1),
    (5, date(2026, 8, 26), 1, 1, Decimal("1.00"), None, "outside the window", "x", None, 1),
]


def text_of(value: Any) -> str:
    """A value as MariaDB writes it as text: what CONCAT_WS hashes."""
    if value is None:
        return "<null>"
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)  # int, date (ISO), datetime ('YYYY-MM-DD HH:MM:SS'), str


def oracle(rows: Sequence[Sequence[Any]], names: Sequence[str]) -> str:
    """The v2 checksum of `rows` (as read back, columns in `names` order), by the documented definition."""
    order = sorted(range(len(names)), key=lambda i: names[i].lower())
    total = sum(zlib.crc32("|".join(text_of(row[i]) for i in order).encode("utf-8")) for row in rows)
    return f"v2:{len(rows)}:{total}"


@pytest.fixture
def maria(mariadb_url: str) -> Iterator[sa.Engine]:
    yield from scratch_tables(mariadb_url, [TABLE], ["DROP TABLE IF EXISTS idem_ck"])


def fill(engine: sa.Engine, rows: Sequence[Sequence[Any]]) -> None:
    names = ", ".join(f"`{c}`" for c in COLUMNS)
    binds = ", ".join(f":c{i}" for i in range(len(COLUMNS)))
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM idem_ck"))
        for row in rows:
            conn.execute(
                sa.text(f"INSERT INTO idem_ck ({names}) VALUES ({binds})"),
                {f"c{i}": v for i, v in enumerate(row)},
            )


def database_checksum(engine: sa.Engine, adapter: MySQLAdapter | None = None) -> str:
    adapter = adapter or MySQLAdapter(engine)
    with engine.connect() as conn:
        info = adapter.describe(conn, "idem_ck")
        query = adapter.window_checksum("idem_ck", "day", list(info.columns.values()))
        window = Window(pendulum.datetime(2026, 8, 25), pendulum.datetime(2026, 8, 26), source="test")
        binds = adapter.window_params(window, "date")
        count, total = adapter.execute(conn, query, binds).one()
    return adapter.checksum_text(int(count), total)


def window_rows(engine: sa.Engine) -> list[tuple[Any, ...]]:
    names = ", ".join(f"`{c}`" for c in COLUMNS)
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(sa.text(f"SELECT {names} FROM idem_ck WHERE day = :day"), {"day": DAY})
        ]


class FormerMySQLAdapter(MySQLAdapter):
    """v2 as written before NOT NULL columns skipped their COALESCE (every column wrapped)."""

    def row_checksum(self, columns: Sequence[ColumnInfo]) -> exp.Expr:
        parts = [exp.func("COALESCE", self.column(c.name), exp.Literal.string("<null>")) for c in columns]
        text = exp.Anonymous(this="CONCAT_WS", expressions=[exp.Literal.string("|"), *parts])
        return exp.Anonymous(this="CRC32", expressions=[text])


def test_the_databases_checksum_is_the_oracles(maria: sa.Engine) -> None:
    fill(maria, ROWS)
    rows = window_rows(maria)
    assert len(rows) == 4 and rows[1][2:7] == (None,) * 5  # NULLs, '' and 0 read back as such
    assert database_checksum(maria) == oracle(rows, COLUMNS)
    assert database_checksum(maria) == database_checksum(maria, FormerMySQLAdapter(maria))


def test_row_order_does_not_matter_and_every_change_is_seen(maria: sa.Engine) -> None:
    fill(maria, ROWS)
    base = database_checksum(maria)
    fill(maria, list(reversed(ROWS)))
    assert database_checksum(maria) == base
    variants = {
        "NULL -> ''": (1, "s", ""),
        "'' -> '0'": (0, "s", "0"),
        "0 -> NULL": (0, "i", None),
        "NULL -> 0": (1, "i", 0),
        "'0' -> ''": (3, "s", ""),
        "one cent": (3, "n", Decimal("-9999999999.98")),
        "a second": (0, "ts", datetime(2026, 8, 25, 1, 2, 4)),
        "NOT NULL column": (1, "Mixed", 8),
    }
    seen = {base}
    for what, (index, column, value) in variants.items():
        changed = [list(r) for r in ROWS]
        changed[index][COLUMNS.index(column)] = value
        fill(maria, changed)
        checksum = database_checksum(maria)
        assert checksum == oracle(window_rows(maria), COLUMNS), what
        assert checksum not in seen, what
        seen.add(checksum)
    moved = [list(r) for r in ROWS]  # a value moving between two columns of a row
    moved[0][COLUMNS.index("i")], moved[0][COLUMNS.index("Mixed")] = 5, 0
    fill(maria, moved)
    before = database_checksum(maria)
    moved[0][COLUMNS.index("i")], moved[0][COLUMNS.index("Mixed")] = 0, 5
    fill(maria, moved)
    assert database_checksum(maria) != before
    swapped = [list(r) for r in ROWS]  # a value moving to another row, the same column
    swapped[0][COLUMNS.index("n")], swapped[3][COLUMNS.index("n")] = Decimal("1.50"), Decimal("0.00")
    fill(maria, swapped)
    assert database_checksum(maria) not in seen


def test_extreme_values_over_many_rows_do_not_overflow(maria: sa.Engine) -> None:
    """The sum is DECIMAL (SUM of an integer), so 100,000 row hashes near 2^32 cannot overflow."""
    with maria.begin() as conn:
        conn.execute(sa.text("SET SESSION max_recursive_iterations = 200000"))
        conn.execute(
            sa.text(
                "INSERT INTO idem_ck (id, day, i, u, n, wide, s, l, ts, Mixed) "
                "WITH RECURSIVE seq (k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM seq WHERE k < 100000) "
                "SELECT k, :day, -2147483648, 18446744073709551615, -9999999999.99, "
                "99999999999999999999999999999999999.999999999999999999999999999999, REPEAT('z', 40), "
                "'x', '9999-12-31 23:59:59', k FROM seq"
            ),
            {"day": DAY},
        )
    checksum = database_checksum(maria)
    assert checksum == oracle(window_rows(maria), COLUMNS)
    assert int(checksum.split(":")[2]) > 2**32


@pytest.mark.parametrize("warehouse", ["mariadb"], indirect=True)
def test_a_window_checksummed_by_the_former_v2_expression_keeps_its_dataset_version(
    loaded: Any,  # noqa: F811 (the fixture)
    history: HistoryStore,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Written before the change (COALESCE on every column), then after: one dataset version, no flag."""
    with monkeypatch.context() as patched:
        patched.setattr(MySQLAdapter, "row_checksum", FormerMySQLAdapter.row_checksum)
        first = make("overwrite").execute(run_ctx(1))
    assert first["checksum"].startswith("v2:")
    second = make("overwrite").execute(run_ctx(2))
    merged = make("merge").execute(run_ctx(3))
    assert second["checksum"] == first["checksum"] == merged["checksum"]
    assert [(o["dataset_version"], o["nondeterministic"]) for o in (second, merged)] == [(1, False)] * 2
    writes = history.writes(target="warehouse:payouts")
    assert len(writes) == 3 and not any(w["nondeterministic"] for w in writes)

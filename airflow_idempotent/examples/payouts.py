"""The reference scenario "the payout that ran twice" (docs/contributing.md).

Source table ``sales`` (a deterministic month of sales, generated set-based inside the database),
target ``payouts`` (one row per sale of the window, key ``sale_id``, partition ``sale_date``),
the job's SELECT (``PAYOUT_SQL``), what a crashed non-transactional writer leaves behind
(``simulate_crash``) and two test oracles (``window_totals``, ``table_checksum``).

The oracles deliberately use nothing from the rest of the package: they read the table with a
plain SELECT and normalise the values in Python, so a test can compare the product's output with
figures that the product did not compute.

Every function takes a SQLAlchemy 2 ``Engine`` whose dialect is one of ``postgresql``, ``mysql``
(MariaDB through pymysql), ``sqlite`` or ``duckdb``. Values are always bound, never formatted into
SQL; table names are checked against ``^[A-Za-z_][A-Za-z0-9_]*$`` before they are used.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

__all__ = [
    "PAYOUT_SQL",
    "POLICY_VERSIONS",
    "SUPPORTED_DIALECTS",
    "create_payout_days",
    "create_payouts",
    "create_sales",
    "rows_checksum",
    "simulate_crash",
    "table_checksum",
    "window_totals",
]

POLICY_VERSIONS = ("v1", "v2")
SUPPORTED_DIALECTS = ("postgresql", "mysql", "sqlite", "duckdb")

# The job: one payout per sale of the window [window_start, window_end), under a policy version.
PAYOUT_SQL = (
    "SELECT s.sale_id, s.sale_date, "
    "ROUND(s.price_eur * CASE WHEN :policy_version = 'v2' AND s.price_eur >= 400 THEN 0.55 ELSE 0.60 END, 2)"
    " AS amount_eur, "
    "CASE WHEN :policy_version = 'v2' AND s.price_eur >= 400 THEN 0.55 ELSE 0.60 END AS rate "
    "FROM sales s WHERE s.sale_date >= :window_start AND s.sale_date < :window_end"
)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CENT = Decimal("0.01")

_SALES_DDL = (
    "CREATE TABLE sales ("
    "sale_id BIGINT PRIMARY KEY, sale_date DATE NOT NULL, price_eur DECIMAL(10,2) NOT NULL{extra})"
)

# Set-based generators: sale_id = i, sale_date = start + (i-1) div per_day, price as in the scenario.
# Integer division is spelled per dialect so that it means floor division of non-negative integers.
_SALES_FILL = {
    "postgresql": (
        "INSERT INTO sales (sale_id, sale_date, price_eur) "
        "SELECT i, CAST(:start AS DATE) + CAST((i - 1) / CAST(:per_day AS BIGINT) AS INTEGER), "
        "ROUND(25 + ((i * 37) % 900) * 0.5, 2) "
        "FROM generate_series(CAST(1 AS BIGINT), CAST(:n AS BIGINT)) AS t(i)"
    ),
    "duckdb": (
        "INSERT INTO sales (sale_id, sale_date, price_eur) "
        "SELECT i, CAST(:start AS DATE) + CAST((i - 1) // CAST(:per_day AS BIGINT) AS INTEGER), "
        "ROUND(25 + ((i * 37) % 900) * 0.5, 2) "
        "FROM range(1, CAST(:n AS BIGINT) + 1) AS t(i)"
    ),
    "mysql": (
        "INSERT INTO sales (sale_id, sale_date, price_eur) "
        "WITH RECURSIVE seq (i) AS ("
        "SELECT CAST(1 AS SIGNED) UNION ALL SELECT i + 1 FROM seq WHERE i < :n) "
        "SELECT i, DATE_ADD(CAST(:start AS DATE), INTERVAL ((i - 1) DIV :per_day) DAY), "
        "ROUND(25 + ((i * 37) % 900) * 0.5, 2) "
        "FROM seq"
    ),
    "sqlite": (
        "INSERT INTO sales (sale_id, sale_date, price_eur) "
        "WITH RECURSIVE seq (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < :n) "
        "SELECT i, date(:start, '+' || ((i - 1) / :per_day) || ' days'), "
        "ROUND(25 + ((i * 37) % 900) * 0.5, 2) "
        "FROM seq"
    ),
}


def dialect_of(engine: Engine) -> str:
    """The engine's dialect name, refusing one the scenario has no generator for."""
    name = engine.dialect.name
    if name not in SUPPORTED_DIALECTS:
        raise ValueError(
            f"unsupported database dialect {name!r}: the payouts scenario supports "
            f"{', '.join(SUPPORTED_DIALECTS)}"
        )
    return name


def table_name(name: str) -> str:
    """A bare table name, checked so the scenario's SQL can name it without quoting."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValueError(
            f"table name {name!r} is not a plain identifier (letters, digits and _, not starting "
            "with a digit); pass the bare table name"
        )
    return name


def date_param(dialect: str, value: date) -> Any:
    """Bind dates as date objects, except on SQLite where dates are stored as ISO text."""
    if isinstance(value, datetime):
        value = value.date()
    return value.isoformat() if dialect == "sqlite" else value


def _set_recursion_limit(conn: Connection, rows: int) -> None:
    """Allow a recursive CTE of `rows` iterations in this MariaDB / MySQL session."""
    limit = max(rows + 10, 1_000_000)
    if getattr(conn.dialect, "is_mariadb", False):
        conn.execute(text("SET SESSION max_recursive_iterations = :n"), {"n": limit})
    else:
        conn.execute(text("SET SESSION cte_max_recursion_depth = :n"), {"n": limit})


def _create_index(conn: Connection, dialect: str, table: str) -> None:
    if dialect == "mysql":
        return  # declared inline in CREATE TABLE (MySQL has no CREATE INDEX IF NOT EXISTS)
    conn.execute(text(f"CREATE INDEX IF NOT EXISTS ix_{table}_sale_date ON {table} (sale_date)"))


def create_sales(engine: Engine, days: int = 30, per_day: int = 2000, start: date = date(2026, 8, 1)) -> int:
    """(Re)create and fill ``sales`` set-based inside the database; return its row count.

    ``sale_id = i`` for i in 1..days*per_day, ``sale_date = start + (i-1) // per_day`` days,
    ``price_eur = round(25 + ((i*37) % 900) * 0.5, 2)``. Nothing is streamed through Python.
    """
    dialect = dialect_of(engine)
    if int(days) < 0 or int(per_day) < 1:
        raise ValueError(f"days must be >= 0 and per_day >= 1 (got days={days}, per_day={per_day})")
    n = int(days) * int(per_day)
    params = {"n": n, "per_day": int(per_day), "start": date_param(dialect, start)}
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS sales"))
        extra = ", INDEX ix_sales_sale_date (sale_date)" if dialect == "mysql" else ""
        conn.execute(text(_SALES_DDL.format(extra=extra)))
        _create_index(conn, dialect, "sales")
        if n > 0:
            if dialect == "mysql":
                _set_recursion_limit(conn, n)
            conn.execute(text(_SALES_FILL[dialect]), params)
        count = conn.execute(text("SELECT COUNT(*) FROM sales")).scalar_one()
    return int(count)


def create_payouts(engine: Engine, table: str = "payouts", keyed: bool = True) -> None:
    """Create the payouts table if missing, with an index on ``sale_date``.

    ``keyed=False`` leaves out the primary key: the naive append table (``payouts_naive``).
    """
    dialect = dialect_of(engine)
    table = table_name(table)
    key = " PRIMARY KEY" if keyed else ""
    extra = f", INDEX ix_{table}_sale_date (sale_date)" if dialect == "mysql" else ""
    ddl = (
        f"CREATE TABLE IF NOT EXISTS {table} ("
        f"sale_id BIGINT NOT NULL{key}, sale_date DATE NOT NULL, "
        f"amount_eur DECIMAL(12,2) NOT NULL, rate DECIMAL(4,2) NOT NULL{extra})"
    )
    _create_if_missing(engine, table, ddl, index=True)


def create_payout_days(engine: Engine, table: str = "payout_days") -> None:
    """Create the daily payout summary (one row per ``sale_date``: ``payouts``, ``amount_eur``) if missing.

    What the partitioned example's downstream DAG writes, once per partition of payouts written.
    """
    table = table_name(table)
    ddl = (
        f"CREATE TABLE IF NOT EXISTS {table} ("
        "sale_date DATE NOT NULL PRIMARY KEY, payouts INTEGER NOT NULL, amount_eur DECIMAL(14,2) NOT NULL)"
    )
    _create_if_missing(engine, table, ddl, index=False)


def _create_if_missing(engine: Engine, table: str, ddl: str, index: bool) -> None:
    """Run `ddl` (a CREATE TABLE IF NOT EXISTS), tolerating another run that creates `table` at once.

    Two runs starting together (two partitions, or a manual run and the one the scheduler creates on
    unpause) race on CREATE TABLE IF NOT EXISTS, which PostgreSQL does not serialise: one of them
    fails on pg_type's unique index. If the table is there afterwards, the other run created it.
    """
    try:
        with engine.begin() as conn:
            conn.execute(text(ddl))
            if index:
                _create_index(conn, dialect_of(engine), table)
    except Exception as err:
        try:
            with engine.connect() as conn:
                conn.execute(text(f"SELECT 1 FROM {table} WHERE 1 = 0"))  # table is validated by the caller
        except Exception:
            raise err from None


def simulate_crash(engine: Engine, day: date, rows: int = 1247, table: str = "payouts") -> int:
    """Leave what a crashed non-transactional writer leaves: the first `rows` payouts of `day`.

    Inserts and commits, in sale_id order, the v1 payouts of the day's first `rows` sales, set-based
    (INSERT ... SELECT ... ORDER BY sale_id LIMIT rows). Deletes nothing first. Returns the number
    of rows inserted.
    """
    dialect = dialect_of(engine)
    table = table_name(table)
    if int(rows) < 0:
        raise ValueError(f"rows must be >= 0 (got {rows})")
    sql = (
        f"INSERT INTO {table} (sale_id, sale_date, amount_eur, rate) "
        f"SELECT p.sale_id, p.sale_date, p.amount_eur, p.rate FROM ({PAYOUT_SQL}) p "
        "ORDER BY p.sale_id LIMIT :rows"
    )
    params = {
        "window_start": date_param(dialect, day),
        "window_end": date_param(dialect, day + timedelta(days=1)),
        "policy_version": "v1",
        "rows": int(rows),
    }
    with engine.begin() as conn:
        result = conn.execute(text(sql), params)
        inserted = result.rowcount
    return int(inserted) if inserted is not None and inserted >= 0 else int(rows)


# ---------------------------------------------------------------------------------------------
# Test oracles: plain SELECTs, normalised in Python. Keep them independent of the product's code.
# ---------------------------------------------------------------------------------------------


def money(value: Any) -> Decimal:
    """Normalise a DECIMAL / REAL / integer column value to a Decimal with two places."""
    if value is None:
        raise ValueError("NULL amount in a NOT NULL money column")
    if isinstance(value, float):
        value = repr(value)  # shortest repr: 15.299999999999999 never, 15.3 always
    return Decimal(value).quantize(_CENT)


def iso_date(value: Any) -> str:
    """A DATE column's value (date, datetime or ISO text, by database) as 'YYYY-MM-DD'."""
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        return date.fromisoformat(value[:10]).isoformat()
    raise TypeError(f"unexpected date value {value!r} ({type(value).__name__})")


def _normalise(row: Sequence[Any]) -> tuple[int, str, Decimal, Decimal]:
    sale_id, sale_date, amount_eur, rate = row
    return int(sale_id), iso_date(sale_date), money(amount_eur), money(rate)


def rows_checksum(rows: Iterable[Sequence[Any]]) -> tuple[int, Decimal, str]:
    """Count, sum of amount_eur and an order-independent sha256 of (sale_id, sale_date, amount, rate) rows.

    Values are normalised first (int, ISO date string, Decimal to 0.01), so the same content gives
    the same checksum on every database and from rows built in Python.
    """
    normalised = sorted(_normalise(r) for r in rows)
    digest = hashlib.sha256()
    total = Decimal("0.00")
    for sale_id, sale_date, amount, rate in normalised:
        digest.update(f"{sale_id}|{sale_date}|{amount}|{rate}\n".encode())
        total += amount
    return len(normalised), total.quantize(_CENT), digest.hexdigest()


def table_checksum(engine: Engine, table: str) -> tuple[int, Decimal, str]:
    """Count, sum of amount_eur and order-independent checksum of every row of `table`."""
    dialect_of(engine)
    table = table_name(table)
    with engine.connect() as conn:
        rows = conn.execute(text(f"SELECT sale_id, sale_date, amount_eur, rate FROM {table}")).all()
    return rows_checksum(rows)


def window_totals(engine: Engine, table: str, day: date) -> tuple[int, Decimal]:
    """Count and sum(amount_eur) of the rows of `table` whose sale_date is `day`."""
    dialect = dialect_of(engine)
    table = table_name(table)
    sql = f"SELECT COUNT(*), SUM(amount_eur) FROM {table} WHERE sale_date = :day"
    with engine.connect() as conn:
        count, total = conn.execute(text(sql), {"day": date_param(dialect, day)}).one()
    return int(count), money(total if total is not None else 0)

"""The payouts scenario's 09:00 bank file: the same bytes for the same window, every time.

One CSV per window, read from the ``payouts`` table, sorted by ``sale_id``::

    # payouts bank file;window_start=2026-08-25;window_end=2026-08-26;rows=2000;total_eur=299730.00
    sale_id,sale_date,amount_eur,rate
    48001,2026-08-25,15.30,0.60
    ...

The header names the half-open window ``[window_start, window_end)`` and the totals. There is no
generation timestamp, host or run id in it, values are normalised (integers, ISO dates, amounts
with two decimals) whatever database they come from, lines end in ``\\n`` and the file is UTF-8:
a rerun of the window delivers byte-identical content, so the delivery can tell "already
delivered" from "different". An empty window is refused: a bank file with nothing to pay means the
payouts were not written.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

from sqlalchemy import text
from sqlalchemy.engine import Engine

from airflow_idempotent.examples.payouts import date_param, dialect_of, iso_date, money, table_name

HEADER_PREFIX = "# payouts bank file"
COLUMNS = ("sale_id", "sale_date", "amount_eur", "rate")


def _as_date(value: date | datetime) -> date:
    return value.date() if isinstance(value, datetime) else value


def bank_file_name(start: date | datetime, end: date | datetime) -> str:
    """``payouts-2026-08-25.csv`` for one day, ``payouts-2026-08-01_2026-08-31.csv`` for several."""
    first, after = _as_date(start), _as_date(end)
    last = after - timedelta(days=1)
    if last == first:
        return f"payouts-{first.isoformat()}.csv"
    return f"payouts-{first.isoformat()}_{last.isoformat()}.csv"


def render_bank_file(
    engine: Engine, start: date | datetime, end: date | datetime, table: str = "payouts"
) -> bytes:
    """The bank file of the payouts whose sale_date is in [start, end), as bytes."""
    dialect = dialect_of(engine)
    table = table_name(table)
    first, after = _as_date(start), _as_date(end)
    if after <= first:
        raise ValueError(f"empty window [{first}, {after}): the end must be after the start")
    sql = (
        f"SELECT sale_id, sale_date, amount_eur, rate FROM {table} "
        "WHERE sale_date >= :window_start AND sale_date < :window_end ORDER BY sale_id"
    )
    params = {"window_start": date_param(dialect, first), "window_end": date_param(dialect, after)}
    with engine.connect() as conn:
        rows = conn.execute(text(sql), params).all()
    if not rows:
        raise ValueError(
            f"no payouts in {table} for [{first}, {after}): a bank file with nothing to pay is never "
            "delivered; write the window's payouts first"
        )
    lines = sorted((int(r[0]), iso_date(r[1]), money(r[2]), money(r[3])) for r in rows)
    total = sum((amount for _, _, amount, _ in lines), Decimal("0.00"))
    out = [
        f"{HEADER_PREFIX};window_start={first.isoformat()};window_end={after.isoformat()};"
        f"rows={len(lines)};total_eur={total:.2f}",
        ",".join(COLUMNS),
    ]
    out.extend(f"{sale_id},{sale_date},{amount:.2f},{rate:.2f}" for sale_id, sale_date, amount, rate in lines)
    return ("\n".join(out) + "\n").encode("utf-8")


def parse_header(first_line: str | bytes) -> dict[str, str]:
    """The header of a bank file as a dict: window_start, window_end, rows, total_eur."""
    line = first_line.decode() if isinstance(first_line, bytes) else first_line
    if not line.startswith(HEADER_PREFIX):
        raise ValueError(f"not a payouts bank file header: {line[:80]!r}")
    return dict(part.split("=", 1) for part in line.strip().split(";")[1:])


def check_complete(
    engine: Engine,
    start: date | datetime,
    end: date | datetime,
    table: str = "payouts",
    source: str = "sales",
) -> int:
    """The window's payouts count, after checking it equals the window's sales count.

    A bank file of a half-written window would pay too little with no error anywhere: refuse it.
    """
    dialect = dialect_of(engine)
    table, source = table_name(table), table_name(source)
    first, after = _as_date(start), _as_date(end)
    params = {"window_start": date_param(dialect, first), "window_end": date_param(dialect, after)}
    where = "WHERE sale_date >= :window_start AND sale_date < :window_end"
    with engine.connect() as conn:
        paid = int(conn.execute(text(f"SELECT COUNT(*) FROM {table} {where}"), params).scalar_one())
        sold = int(conn.execute(text(f"SELECT COUNT(*) FROM {source} {where}"), params).scalar_one())
    if paid != sold or paid == 0:
        raise ValueError(
            f"{table} holds {paid} row(s) for [{first}, {after}) but {source} holds {sold}: the window's "
            "payouts are not complete, so no bank file is delivered; write the window first, then retry"
        )
    return paid

"""PostgreSQL's window checksum (v2): NOT NULL columns skip their COALESCE, and the value stays.

History compares a window's checksum across runs, so a checksum written before this change must
equal the one written after it. The reference is the v2 definition as docs/checksum.md gave it,
COALESCE on every column, spelled out here by hand (not built by the adapter), over a table of
each typed hash with NOT NULL and nullable columns, NULLs and extreme values among the rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pendulum
import pytest
import sqlalchemy as sa

from airflow_idempotent.adapters.postgres import PostgresAdapter
from airflow_idempotent.window import Window
from tests.conftest import scratch_tables

TABLE = """
CREATE TABLE idem_ck (
    id BIGINT NOT NULL PRIMARY KEY, d DATE NOT NULL, n NUMERIC(12, 2) NOT NULL, t TEXT NOT NULL,
    ts TIMESTAMP NOT NULL, tz TIMESTAMP WITH TIME ZONE NOT NULL, j JSONB NOT NULL,
    i INTEGER, n2 NUMERIC, f DOUBLE PRECISION, v VARCHAR(20), u UUID
);
INSERT INTO idem_ck VALUES
    (1, '2026-08-25', 1.50, 'x', '2026-08-25 01:00', '2026-08-25 01:00+02', '{"k": 1}',
     7, 2, 0.25, 'y', '9b2f3c1e-0000-4000-8000-000000000001'),
    (2, '2026-08-25', -9999999999.99, '', '2026-08-25 23:59:59.999999', '2026-08-25 00:00+00', '[]',
     NULL, NULL, NULL, NULL, NULL),
    (9223372036854775807, '2026-08-25', 0, 'naïve — ü', '2026-08-25', '2026-08-24 23:00-02', 'null',
     -2147483648, 1e-30, 'NaN', '', '00000000-0000-0000-0000-000000000000'),
    (4, '2026-08-26', 1, 'outside the window', '2026-08-26', '2026-08-26 00:00+00', '{}',
     1, 1, 1, 'z', NULL);
"""

#: v2 as docs/checksum.md defined it before NOT NULL columns skipped their COALESCE: the XOR over
#: the columns in name order of COALESCE(typed_hash(c, seed), seed), summed over the window.
FORMER = (
    "SELECT COUNT(*), COALESCE(SUM("
    "COALESCE(hashint4extended(d - DATE '1970-01-01', 0), 0)"
    " # COALESCE(hashfloat8extended(f, 1), 1)"
    " # COALESCE(hashint8extended(i, 2), 2)"
    " # COALESCE(hashint8extended(id, 3), 3)"
    " # COALESCE(hashtextextended(CAST(j AS TEXT), 4), 4)"
    " # COALESCE(hash_numeric_extended(n, 5), 5)"
    " # COALESCE(hash_numeric_extended(n2, 6), 6)"
    " # COALESCE(hashtextextended(t, 7), 7)"
    " # COALESCE(timestamp_hash_extended(ts, 8), 8)"
    " # COALESCE(timestamp_hash_extended(tz AT TIME ZONE 'UTC', 9), 9)"
    " # COALESCE(uuid_hash_extended(u, 10), 10)"
    " # COALESCE(hashtextextended(v, 11), 11)"
    "), 0) FROM idem_ck WHERE d >= :window_start AND d < :window_end"
)


@pytest.fixture
def pg(pg_url: str) -> Iterator[sa.Engine]:
    yield from scratch_tables(pg_url, [TABLE], ["DROP TABLE IF EXISTS idem_ck"])


def test_the_checksum_without_coalesce_on_not_null_columns_is_the_former_one(pg: sa.Engine) -> None:
    adapter = PostgresAdapter(pg)
    start = pendulum.datetime(2026, 8, 25, tz="UTC")
    params = adapter.window_params(Window(start, start.add(days=1), source="test"), "date")
    with pg.connect() as conn:
        info = adapter.describe(conn, "idem_ck")
        query = adapter.render(adapter.window_checksum("idem_ck", "d", list(info.columns.values())))
        ours = tuple(conn.execute(sa.text(query), params).one())
        former = tuple(conn.execute(sa.text(FORMER), params).one())
    assert ours == former
    assert ours[0] == 3  # the row of 2026-08-26 is outside the window
    # the NOT NULL columns' hashes are no longer wrapped; the nullable ones still are
    assert 'COALESCE(HASHINT8EXTENDED("id", 3), 3)' not in query
    assert 'COALESCE(HASHINT8EXTENDED("i", 2), 2)' in query
    assert adapter.checksum_text(*ours).startswith("v2:3:")

"""PostgreSQL's one-query reflection: the same TableInfo, hence the same checksum, as SQLAlchemy's.

The window checksum (v2) picks each column's hash by its reflected type, so a reflection that
spelled a type otherwise would silently change every checksum and flag windows nondeterministic
after an upgrade. The reference here is SQLAlchemy's inspector (`EngineAdapter.describe`, what the
adapter used before), on a table of every type the typed hashes know and a few they do not.
"""

from __future__ import annotations

from collections.abc import Iterator

import pendulum
import pytest
import sqlalchemy as sa

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.adapters.postgres import PostgresAdapter
from airflow_idempotent.errors import SchemaError
from airflow_idempotent.window import Window
from tests.conftest import scratch_tables

TABLE = """
CREATE DOMAIN idem_day AS date;
CREATE TABLE idem_types (
    id BIGINT PRIMARY KEY, i INTEGER NOT NULL, s SMALLINT, n NUMERIC(12, 2), n0 NUMERIC,
    f DOUBLE PRECISION, r REAL, t TEXT, v VARCHAR(20), c CHAR(3), u UUID, b BOOLEAN, j JSONB,
    d DATE NOT NULL, dd idem_day, ts TIMESTAMP, tz TIMESTAMP WITH TIME ZONE, tm TIME,
    "MixedCase" INTEGER, a INTEGER, bb INTEGER,
    UNIQUE (a, bb)
);
CREATE UNIQUE INDEX idem_types_partial ON idem_types (s) WHERE s > 0;
CREATE UNIQUE INDEX idem_types_expr ON idem_types (lower(t));
INSERT INTO idem_types VALUES
    (1, 1, 1, 1.50, 2, 0.25, 0.5, 'x', 'y', 'abc', '9b2f3c1e-0000-4000-8000-000000000001', true,
     '{"k": 1}', '2026-08-25', '2026-08-25', '2026-08-25 01:00', '2026-08-25 01:00+00', '01:00',
     7, 1, 1),
    (2, 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2026-08-25', NULL,
     NULL, NULL, NULL, NULL, 2, 2);
"""


@pytest.fixture
def pg(pg_url: str) -> Iterator[sa.Engine]:
    yield from scratch_tables(
        pg_url, [TABLE], ["DROP TABLE IF EXISTS idem_types; DROP DOMAIN IF EXISTS idem_day"]
    )


def test_one_query_reflection_matches_sqlalchemys(pg: sa.Engine) -> None:
    adapter = PostgresAdapter(pg)
    with pg.connect() as conn:
        ours = adapter.describe(conn, "idem_types")
        theirs = EngineAdapter.describe(adapter, conn, "idem_types")
        assert list(ours.columns) == list(theirs.columns)  # same names, same order
        for key, col in ours.columns.items():
            assert (col.name, col.kind, col.nullable) == (
                theirs.columns[key].name,
                theirs.columns[key].kind,
                theirs.columns[key].nullable,
            ), key
        # the keys an ON CONFLICT can use: the primary key and the (a, bb) constraint, not the
        # partial or expression indexes (SQLAlchemy lists those too, with their columns cut)
        assert set(ours.unique_keys) == {frozenset({"id"}), frozenset({"a", "bb"})}
        assert set(ours.unique_keys) < set(theirs.unique_keys)
        start = pendulum.datetime(2026, 8, 25, tz="UTC")
        params = adapter.window_params(Window(start, start.add(days=1), source="test"), "date")
        sums = [
            conn.execute(
                sa.text(
                    adapter.render(adapter.window_checksum("idem_types", "d", list(info.columns.values())))
                ),
                params,
            ).one()
            for info in (ours, theirs)
        ]
    assert sums[0] == sums[1]
    assert sums[0][0] == 2


def test_an_unknown_or_invisible_table_is_refused(pg: sa.Engine) -> None:
    adapter = PostgresAdapter(pg)
    with pg.connect() as conn:
        for name in ("idem_typez", "other_schema.idem_types", "IDEM_TYPES"):
            with pytest.raises(SchemaError, match="does not exist"):
                adapter.describe(conn, name)
        assert adapter.describe(conn, "public.idem_types").schema == "public"


DUCK_TABLE = (
    "CREATE TABLE mart.idem_duck (id BIGINT PRIMARY KEY, d DATE NOT NULL, ts TIMESTAMP, "
    "tz TIMESTAMP WITH TIME ZONE, n DECIMAL(12, 2), t VARCHAR, a INTEGER, b INTEGER, "
    '"MixedCase" INTEGER, UNIQUE (a, b))'
)


@pytest.fixture
def duck(duckdb_url: str) -> Iterator[sa.Engine]:
    yield from scratch_tables(
        duckdb_url, ["CREATE SCHEMA IF NOT EXISTS mart", DUCK_TABLE], ["DROP TABLE IF EXISTS mart.idem_duck"]
    )


def test_duckdb_reflection_matches_duckdbs_own_table_info(duck: sa.Engine) -> None:
    """DuckDB's catalog read: the names, order, types and NULL-ability `PRAGMA table_info` gives,
    the primary key as its listed key and the UNIQUE constraint through `has_unique_key` (read
    from `duckdb_constraints()` only then); a table in another schema is found only by its
    qualified name."""
    from airflow_idempotent.adapters.duckdb import DuckDBAdapter

    adapter = DuckDBAdapter(duck)
    with duck.connect() as conn:
        info = adapter.describe(conn, "mart.idem_duck")
        pragma = conn.execute(sa.text("PRAGMA table_info('mart.idem_duck')")).all()
        unique = {
            keys: adapter.has_unique_key(conn, info, keys)
            for keys in (("id",), ("B", "a"), ("a",), ("id", "a"), ("t",))
        }
        with pytest.raises(SchemaError, match="does not exist"):
            adapter.describe(conn, "idem_duck")  # not in main
    assert [(c.name, c.type_name, c.nullable) for c in info.columns.values()] == [
        (str(r[1]), str(r[2]), not r[3]) for r in pragma
    ]
    assert [c.kind for c in info.columns.values()][:4] == ["other", "date", "timestamp", "timestamptz"]
    assert set(info.unique_keys) == {frozenset({"id"})}
    assert unique == {("id",): True, ("B", "a"): True, ("a",): False, ("id", "a"): False, ("t",): False}

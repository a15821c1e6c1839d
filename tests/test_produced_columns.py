"""The SELECT's result columns, read from the parsed query where every engine names them alike.

A write must know which of the target's columns the SELECT produces. Where every projection is a
plain column or has an alias, the parsed query says so without a statement; otherwise the
database answers a probe. The reference here is the database's own answer: the names its cursor
gives the same query, run directly.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
import sqlglot

from airflow_idempotent.adapters import adapter_for
from airflow_idempotent.lint import check_deterministic
from tests.conftest import Warehouse

# (query in PostgreSQL's spelling, whether its names can be read without asking the database)
QUERIES = [
    ("SELECT a, b FROM idem_src", True),
    ('SELECT a AS x, s.b, b AS "MixedCase" FROM idem_src AS s', True),
    ("SELECT a AS Amount FROM idem_src", True),
    ("WITH w AS (SELECT a, b FROM idem_src) SELECT b, a FROM w", True),
    ("SELECT a, b FROM idem_src UNION ALL SELECT b, a FROM idem_src", True),
    ("SELECT * FROM idem_src", False),
    ("SELECT s.* FROM idem_src AS s", False),
    ("SELECT a, b + 1 FROM idem_src", False),
    ("SELECT CAST(a AS INT) FROM idem_src", False),
]


@pytest.mark.parametrize(("query", "static"), QUERIES, ids=[q for q, _ in QUERIES])
def test_names_match_the_databases_own(warehouse: Warehouse, query: str, static: bool) -> None:
    engine = warehouse.engine
    adapter = adapter_for(engine)
    sql = sqlglot.transpile(query, read="postgres", write=adapter.dialect)[0]
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE idem_src (a INTEGER, b INTEGER)"))
        theirs = list(conn.execute(sa.text(sql)).keys())
        sa.event.listen(engine, "before_cursor_execute", seen)
        try:
            ours = adapter.produced_columns(conn, check_deterministic(sql, adapter.dialect), {})
        finally:
            sa.event.remove(engine, "before_cursor_execute", seen)
        conn.execute(sa.text("DROP TABLE idem_src"))
    # the write matches them to the target's columns case-insensitively, as every engine here does
    assert [n.lower() for n in ours] == [n.lower() for n in theirs]
    assert len(statements) == (0 if static else 1), statements

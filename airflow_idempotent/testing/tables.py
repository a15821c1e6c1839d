"""Reading, restoring and comparing tables: plain SQL through SQLAlchemy Core, values normalised in
Python (never the product's checksum), so a bug in the product cannot hide itself.

`compare_tables` names what differs by key: rows duplicated, missing or extra, values drifting.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from airflow_idempotent.testing.errors import HarnessError

__all__ = [
    "JSON_SAMPLE",
    "SAMPLE",
    "Snapshot",
    "TableDiff",
    "TableState",
    "compare_tables",
    "key_columns",
    "normalise",
    "read_table",
    "restore",
    "snapshot",
]

#: How many offending keys or rows a report names per kind of difference (text; JSON).
SAMPLE = 5
JSON_SAMPLE = 100
_KEY_COLUMN = re.compile(r"^(id|.+_id)$", re.IGNORECASE)


@dataclass
class TableState:
    """A table's whole content as the harness read it: columns and normalised rows."""

    table: str
    exists: bool
    columns: tuple[str, ...] = ()
    rows: Counter[tuple[str | None, ...]] = field(default_factory=Counter)

    @property
    def row_count(self) -> int:
        return sum(self.rows.values())

    @property
    def checksum(self) -> str:
        """Order-independent sha256 of the normalised rows (and the column names)."""
        digest = hashlib.sha256("|".join(self.columns).encode())
        for row in sorted(self.rows.elements(), key=_sort_key):
            digest.update(("\x1f".join("\x00" if v is None else v for v in row) + "\n").encode())
        return digest.hexdigest() if self.exists else "absent"

    def describe(self) -> str:
        if not self.exists:
            return f"{self.table}: absent"
        return f"{self.table} {self.row_count:,} rows (sha256 {self.checksum[:12]})"


def _sort_key(row: tuple[str | None, ...]) -> tuple[tuple[bool, str], ...]:
    return tuple((v is None, v or "") for v in row)


@dataclass
class TableDiff:
    """How a table after the scenario differs from the clean run, named by key."""

    table: str
    key: tuple[str, ...]
    expected: TableState
    actual: TableState
    duplicated: list[tuple[tuple[str | None, ...], int, int]] = field(default_factory=list)
    missing: list[tuple[tuple[str | None, ...], int]] = field(default_factory=list)
    extra: list[tuple[tuple[str | None, ...], int]] = field(default_factory=list)
    drifted: list[tuple[tuple[str | None, ...], dict[str, tuple[str | None, str | None]]]] = field(
        default_factory=list
    )
    writers: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.expected.checksum == self.actual.checksum

    @property
    def kinds(self) -> list[str]:
        """What went wrong, in words: "rows duplicated", "rows missing", "rows extra", "values drifting"."""
        out = []
        if not self.actual.exists and self.expected.exists:
            out.append("table missing")
        if self.duplicated:
            out.append("rows duplicated")
        if self.missing:
            out.append("rows missing")
        if self.extra:
            out.append("rows extra")
        if self.drifted:
            out.append("values drifting")
        if not out and not self.ok:
            out.append("content differs")
        return out

    def _name(self, values: tuple[str | None, ...]) -> str:
        if len(self.key) == 1:
            return f"{self.key[0]} {values[0]}"
        return "(" + ", ".join(f"{k}={v}" for k, v in zip(self.key, values, strict=False)) + ")"

    def describe(self) -> str:
        """One paragraph: counts, then the offending keys or rows by name."""
        if self.ok:
            return f"{self.table}: same as the clean run ({self.actual.row_count:,} rows)"
        if not self.actual.exists:
            return f"{self.table}: absent, but the clean run left {self.expected.row_count:,} rows"
        parts = [
            f"{self.table}: {self.actual.row_count:,} rows, the clean run has {self.expected.row_count:,}"
        ]
        if self.duplicated:
            total = sum(actual - expected for _, actual, expected in self.duplicated)
            expected_counts = {expected for _, _, expected in self.duplicated}
            same = len(expected_counts) == 1
            named = ", ".join(
                f"{self._name(k) if i == 0 or len(self.key) > 1 else k[0]} x{actual}"
                + ("" if same else f" (expected {expected})")
                for i, (k, actual, expected) in enumerate(self.duplicated[:SAMPLE])
            )
            each = f" (expected {expected_counts.pop()} each)" if same else ""
            parts.append(
                f"rows duplicated: {len(self.duplicated):,} {self._what()} ({total:,} extra copies), e.g. "
                f"{named}{_more(len(self.duplicated))}{each}"
            )
        if self.missing:
            named = ", ".join(self._name(k) for k, _ in self.missing[:SAMPLE])
            parts.append(f"rows missing: {len(self.missing):,}, e.g. {named}{_more(len(self.missing))}")
        if self.extra:
            named = ", ".join(self._name(k) for k, _ in self.extra[:SAMPLE])
            parts.append(f"rows extra: {len(self.extra):,}, e.g. {named}{_more(len(self.extra))}")
        if self.drifted:
            shown = []
            for k, changes in self.drifted[:SAMPLE]:
                change = ", ".join(f"{col} {old} -> {new}" for col, (old, new) in changes.items())
                shown.append(f"{self._name(k)}: {change}")
            parts.append(
                f"values drifting: {len(self.drifted):,} {self._what()}, e.g. {'; '.join(shown)}"
                f"{_more(len(self.drifted))}"
            )
        return "; ".join(parts)

    def _what(self) -> str:
        return "keys" if self.key != self.expected.columns else "rows"

    def as_dict(self) -> dict[str, Any]:
        def named(values: tuple[str | None, ...]) -> dict[str, str | None]:
            return dict(zip(self.key, values, strict=False))

        return {
            "table": self.table,
            "ok": self.ok,
            "kinds": self.kinds,
            "key": list(self.key),
            "writers": self.writers,
            "expected": {"rows": self.expected.row_count, "checksum": self.expected.checksum},
            "actual": {"rows": self.actual.row_count, "checksum": self.actual.checksum},
            "counts": {
                "duplicated": len(self.duplicated),
                "missing": len(self.missing),
                "extra": len(self.extra),
                "drifted": len(self.drifted),
            },
            # at most JSON_SAMPLE of each, named by key
            "duplicated": [
                {"key": named(k), "copies": a, "expected": e} for k, a, e in self.duplicated[:JSON_SAMPLE]
            ],
            "missing": [{"key": named(k), "copies": n} for k, n in self.missing[:JSON_SAMPLE]],
            "extra": [{"key": named(k), "copies": n} for k, n in self.extra[:JSON_SAMPLE]],
            "drifted": [
                {"key": named(k), "changes": {c: {"clean": o, "actual": n} for c, (o, n) in ch.items()}}
                for k, ch in self.drifted[:JSON_SAMPLE]
            ],
        }


def _more(count: int) -> str:
    return f" and {count - SAMPLE:,} more" if count > SAMPLE else ""


def normalise(value: Any) -> str | None:
    """One value as text that compares equal across runs of the same database."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        if value.is_nan():
            return "NaN"
        text = format(value.normalize(), "f")
        return "0" if text in ("-0", "0") else text
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def _split(table: str) -> tuple[str | None, str]:
    schema, _, name = table.rpartition(".")
    return (schema or None), name


def _quoted(dialect: sa.Dialect, table: str) -> str:
    """The table's name quoted by the database's own rules (the names come from the DAG, not from data)."""
    preparer = dialect.identifier_preparer
    schema, name = _split(table)
    return (f"{preparer.quote_schema(schema)}." if schema else "") + preparer.quote(name)


def _exists(conn: sa.Connection, table: str) -> bool:
    schema, name = _split(table)
    return bool(sa.inspect(conn).has_table(name, schema=schema))


def read_table(engine: Engine, table: str) -> TableState:
    """The table's whole content (a plain SELECT *), normalised; or "absent"."""
    with engine.connect() as conn:
        if not _exists(conn, table):
            return TableState(table, exists=False)
        result = conn.execute(sa.text(f"SELECT * FROM {_quoted(engine.dialect, table)}"))
        columns = tuple(result.keys())
        rows = Counter(tuple(normalise(v) for v in row) for row in result)
    return TableState(table, True, columns, rows)


@dataclass
class Snapshot:
    """A table's raw content, to put back before each scenario."""

    table: str
    exists: bool
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def snapshot(engine: Engine, table: str) -> Snapshot:
    """The table's raw content (or that it is absent), to put back with `restore`."""
    with engine.connect() as conn:
        if not _exists(conn, table):
            return Snapshot(table, False)
        result = conn.execute(sa.text(f"SELECT * FROM {_quoted(engine.dialect, table)}"))
        return Snapshot(table, True, tuple(result.keys()), [tuple(row) for row in result])


def restore(engine: Engine, snapshot: Snapshot) -> None:
    """Put the table back as it was: the same rows, or absent if it was absent."""
    name = _quoted(engine.dialect, snapshot.table)
    with engine.begin() as conn:
        exists = _exists(conn, snapshot.table)
        if not snapshot.exists:
            if exists:
                conn.execute(sa.text(f"DROP TABLE {name}"))
            return
        if not exists:
            raise HarnessError(
                f"{snapshot.table} existed before the check but a task dropped it, so the harness cannot "
                "put it back: pass reset=<a function that recreates the starting state>"
            )
        conn.execute(sa.text(f"DELETE FROM {name}"))
        if snapshot.rows:
            preparer = engine.dialect.identifier_preparer
            columns = ", ".join(preparer.quote(c) for c in snapshot.columns)
            values = ", ".join(f":p{i}" for i in range(len(snapshot.columns)))
            conn.execute(
                sa.text(f"INSERT INTO {name} ({columns}) VALUES ({values})"),
                [{f"p{i}": v for i, v in enumerate(row)} for row in snapshot.rows],
            )


def key_columns(
    engine: Engine, table: str, declared: Sequence[str] | None, clean: TableState
) -> tuple[str, ...]:
    """The columns that identify a row: declared, else the primary key or a unique constraint or
    index, else an `id` / `*_id` column unique in the clean run, else the whole row."""
    columns = clean.columns
    lower = {c.lower(): c for c in columns}
    if declared:
        return tuple(lower.get(k.lower(), k) for k in declared)
    schema, name = _split(table)
    with contextlib.suppress(Exception), engine.connect() as conn:
        inspector = sa.inspect(conn)
        pk = inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or []
        if pk:
            return tuple(pk)
        for unique in inspector.get_unique_constraints(name, schema=schema):
            if unique.get("column_names"):
                return tuple(unique["column_names"])
        for index in inspector.get_indexes(name, schema=schema):
            if index.get("unique") and index.get("column_names"):
                return tuple(c for c in index["column_names"] if c)
    for i, column in enumerate(columns):
        if _KEY_COLUMN.fullmatch(column):
            values = [row[i] for row in clean.rows.elements()]
            if None not in values and len(set(values)) == len(values) and values:
                return (column,)
    return columns


def compare_tables(expected: TableState, actual: TableState, key: Sequence[str] = ()) -> TableDiff:
    """How `actual` differs from `expected`, named by the `key` columns (the whole row when empty)."""
    columns = expected.columns or actual.columns
    key = tuple(key) or columns
    diff = TableDiff(expected.table, key, expected, actual)
    if diff.ok or not actual.exists or not expected.exists:
        if not expected.exists and actual.exists:
            diff.extra = [(row, n) for row, n in sorted(actual.rows.items(), key=lambda i: _sort_key(i[0]))]
        return diff
    positions = [columns.index(k) for k in key if k in columns]
    if len(positions) != len(key) or actual.columns != expected.columns:
        positions = list(range(len(columns)))
        diff.key = columns

    def grouped(state: TableState) -> dict[tuple[str | None, ...], Counter[tuple[str | None, ...]]]:
        out: dict[tuple[str | None, ...], Counter[tuple[str | None, ...]]] = {}
        for row, count in state.rows.items():
            out.setdefault(tuple(row[p] for p in positions), Counter())[row] += count
        return out

    want, got = grouped(expected), grouped(actual)
    for k in sorted(set(want) | set(got), key=_sort_key):
        w, g = want.get(k, Counter()), got.get(k, Counter())
        nw, ng = sum(w.values()), sum(g.values())
        if ng == 0:
            diff.missing.append((k, nw))
        elif nw == 0:
            diff.extra.append((k, ng))
        elif ng > nw:
            diff.duplicated.append((k, ng, nw))
        elif ng < nw:
            diff.missing.append((k, nw - ng))
        elif w != g:
            changes: dict[str, tuple[str | None, str | None]] = {}
            old, new = next(iter(w - g), None), next(iter(g - w), None)
            if old is not None and new is not None:
                for i, column in enumerate(columns):
                    if old[i] != new[i]:
                        changes[column] = (old[i], new[i])
            diff.drifted.append((k, changes))
    return diff

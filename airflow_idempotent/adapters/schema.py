"""What an adapter knows of a target table: its columns, their kinds and its unique keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from airflow_idempotent.errors import SchemaError

#: How a column's values are bound as window bounds: a date, a naive or an aware timestamp, or
#: not at all ("other": the column cannot partition a window).
ColumnKind = Literal["date", "timestamp", "timestamptz", "other"]


@dataclass(frozen=True)
class ColumnInfo:
    """A target column as reflected from the database."""

    name: str
    type_name: str
    kind: ColumnKind
    nullable: bool
    #: The database fills it from a counter when an insert omits it (MariaDB's AUTO_INCREMENT):
    #: such an insert sets the connection's LAST_INSERT_ID, which MariaDB's merge reads otherwise.
    autoincrement: bool = False


@dataclass(frozen=True)
class TableInfo:
    """What the strategies need to know about a target table before writing to it."""

    schema: str | None
    name: str
    columns: Mapping[str, ColumnInfo]  # keyed by lower-case name
    #: lower-case column sets of the PK and unique indexes; an adapter whose catalog makes some of
    #: them costly lists the cheap ones here and the rest in its `has_unique_key`
    unique_keys: tuple[frozenset[str], ...]

    def column(self, name: str, role: str) -> ColumnInfo:
        """The column called `name` (case-insensitive), or a SchemaError naming the choices."""
        info = self.columns.get(name.lower())
        if info is None:
            raise SchemaError(
                f"{role} {name!r} is not a column of {self.qualified}: its columns are "
                f"{', '.join(c.name for c in self.columns.values())}. Fix the operator's {role}."
            )
        return info

    def ordered(self, names: frozenset[str]) -> list[str]:
        """The columns `names` (lower-case) spelled as the table spells them, in the table's order."""
        return [c.name for key, c in self.columns.items() if key in names]

    def no_unique_key(self, keys: list[str]) -> SchemaError:
        """The error for an upsert on `keys` that no primary key or unique index covers, with the fix.

        When the table already has a key holding `keys` and more (a daily table keyed by
        (order_date, customer), merged on customer), a unique index on `keys` would allow one row
        per `keys` for all windows, which breaks the table: the fix is to merge on its key. When it
        has other keys, those are named first; only a table without any is told to add one.
        """
        wanted = frozenset(k.lower() for k in keys)
        head = (
            f"{self.qualified} has no primary key or unique index on ({', '.join(keys)}), so an upsert "
            "cannot find existing rows"
        )
        wider = sorted((self.ordered(k) for k in self.unique_keys if wanted < k), key=len)
        if wider:
            key = wider[0]
            extra = [c for c in key if c.lower() not in wanted]
            return SchemaError(
                f"{head}. Its key is ({', '.join(key)}): key_columns={keys!r} leaves out "
                f"{', '.join(extra)}, so one ({', '.join(keys)}) has several rows in the table. Merge on "
                f"the table's key: key_columns={key!r} (a unique index on ({', '.join(keys)}) alone "
                "would allow only one row per value across every window)."
            )
        others = [self.ordered(k) for k in self.unique_keys if k]
        if others:
            named = " or ".join(f"key_columns={k!r}" for k in others)
            return SchemaError(
                f"{head}. Its keys: {named}. Merge on one of them, or, if ({', '.join(keys)}) really "
                f"identifies a row, add CREATE UNIQUE INDEX ON {self.qualified} ({', '.join(keys)})."
            )
        return SchemaError(
            f"{head}: add one, e.g. CREATE UNIQUE INDEX ON {self.qualified} ({', '.join(keys)})."
        )

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

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

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

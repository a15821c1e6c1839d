"""Names a user gives (tables, columns, parameters): validated as plain identifiers before any SQL
is built from them, so a name never carries SQL. The adapters quote them; a name's parts are split
here alone (`table_parts`), for every engine and for the Spark catalogs.
"""

from __future__ import annotations

import re

from airflow_idempotent.errors import InvalidIdentifierError

IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def validate_identifier(name: str, what: str = "identifier") -> str:
    """Return `name` if it is a plain identifier, else refuse it: it might carry SQL."""
    if not isinstance(name, str) or not IDENTIFIER_RE.fullmatch(name):
        raise InvalidIdentifierError(
            f"{what} {name!r} is not a plain identifier: use letters, digits and underscores, "
            "starting with a letter or underscore, at most 63 characters (e.g. 'payouts'). "
            "Names are quoted by the adapter; SQL inside a name is never accepted."
        )
    return name


def table_parts(name: str) -> tuple[str | None, str | None, str]:
    """Split `catalog.schema.table`, `schema.table` or `table` into validated parts, None for
    those absent. The one place a table name is split; a catalog part names one of a Spark
    server's catalogs (an Iceberg catalog: `ice.db.payouts`)."""
    if not isinstance(name, str):
        raise InvalidIdentifierError(f"table name must be a string, got {type(name).__name__}")
    parts = name.split(".")
    if len(parts) > 3:
        raise InvalidIdentifierError(
            f"table name {name!r} has more than two dots: give 'table', 'schema.table' or, on Spark, "
            "'catalog.schema.table'."
        )
    table = validate_identifier(parts[-1], "table name")
    schema = validate_identifier(parts[-2], "schema name") if len(parts) > 1 else None
    catalog = validate_identifier(parts[0], "catalog name") if len(parts) > 2 else None
    return catalog, schema, table


def split_table_name(name: str) -> tuple[str | None, str]:
    """Split `schema.table` (or `table`) into validated parts; a catalog part is refused (only a
    Spark connection reaches several catalogs, and its adapter reads `table_parts`)."""
    catalog, schema, table = table_parts(name)
    if catalog is not None:
        raise InvalidIdentifierError(
            f"table name {name!r} names a catalog ({catalog!r}), which only a Spark connection has: "
            "give 'table' or 'schema.table'."
        )
    return schema, table

"""Partitions dropped or swapped by a function call in a SELECT (Vertica), read as writes.

Principle (round 33, a games company's Responsys snapshots): ``SELECT DROP_PARTITION('s.t',
'{{ ds }}')`` before ``INSERT INTO s.t ..`` deletes the run's partition first, as a ``DELETE .. WHERE
ds = ..`` would: the insert replaces it. Vertica's functions, as its SQL reference documents them:

- ``DROP_PARTITION(table, key)`` (before 9.0) and ``DROP_PARTITIONS(table, min, max)``: drop the
  table's partitions with those keys (a delete of them);
- ``SWAP_PARTITIONS_BETWEEN_TABLES(staging, min, max, target)``: drops the target's partitions in the
  range and moves the staging table's in, in one transaction (the target's range is replaced);
- ``MOVE_PARTITIONS_TO_TABLE(source, min, max, target)``: moves partitions out of the source (a delete
  there); what it adds to the target is not judged here (a rerun finds the source's range empty).
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["partition_writes"]

#: function name -> (position of the table it clears, position of the table it fills, how it fills)
_FUNCTIONS: dict[str, tuple[int | None, int | None, str]] = {
    "drop_partition": (0, None, ""),
    "drop_partitions": (0, None, ""),
    "swap_partitions_between_tables": (None, 3, "overwrite"),
    "move_partitions_to_table": (0, None, ""),
}


def _table_argument(args: list[exp.Expression], at: int | None) -> str | None:
    """The table named by the string argument at `at` (``'schema.table'``), lower case."""
    if at is None or at >= len(args):
        return None
    arg = args[at]
    if not isinstance(arg, exp.Literal) or not arg.is_string:
        return None
    parts = [p.strip().strip('"') for p in arg.this.split(".")]
    if not all(parts) or any("{" in p or " " in p for p in parts):
        return None
    return ".".join(parts).lower()


def partition_writes(stmt: exp.Expression) -> list[tuple[str, str, str]]:
    """(table, how, detail) for each partition function a SELECT calls: ``delete`` for the table whose
    partitions it drops, ``overwrite`` for the table a swap fills."""
    found: list[tuple[str, str, str]] = []
    for call in stmt.find_all(exp.Anonymous):
        name = str(call.this).lower()
        spec = _FUNCTIONS.get(name)
        if spec is None:
            continue
        args = list(call.expressions)
        cleared, filled = _table_argument(args, spec[0]), _table_argument(args, spec[1])
        if cleared is not None:
            found.append((cleared, "delete", f"{name.upper()}('{cleared}', ..)"))
        if filled is not None:
            found.append((filled, spec[2], f"swaps the range's partitions into {filled} ({name.upper()})"))
    return found

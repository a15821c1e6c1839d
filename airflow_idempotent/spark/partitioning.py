"""Whether an Iceberg table's partitioning lets ONE overwrite by filter replace a window.

Iceberg's overwrite by filter (``REPLACE WHERE``, ``writeTo(t).overwrite(<window>)``) removes
whole data files, never rows: for every live file the filter might match (by its partition,
then its column metrics), ``ManifestFilterManager`` checks that the filter must match every row of
it, and otherwise fails the commit with "Cannot delete file where some, but not all, rows match
filter" (nothing committed). So a window can be overwritten when each file lies wholly inside or
wholly outside it:

- partitioned by the window's column itself (identity), or by a time transform of it (``years``,
  ``months``, ``days``, ``hours``) whose periods the window's bounds do not cut: a file of
  ``months(d)`` holds one month, so a window of whole months fits, one day does not (`window_fit`);
- partitioned otherwise (not at all, ``bucket``, ``truncate``, other columns): only the files'
  column bounds say, and they depend on how the files were written (one write per day keeps a
  file within a day; a compaction merges days): Iceberg's own check decides at the commit.

Pure functions of the partition fields (`SparkTableInfo.partitioning`) and the bound values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import cast

import pendulum

from airflow_idempotent.instants import Granularity, period_containing

#: Iceberg's time transforms (Spark's names and Iceberg's own), by the period a file of one holds.
TIME_TRANSFORMS = {
    "years": "year",
    "year": "year",
    "months": "month",
    "month": "month",
    "days": "day",
    "day": "day",
    "hours": "hour",
    "hour": "hour",
    "date_hour": "hour",
}
#: The text of Iceberg's refusal of an overwrite whose filter cuts a data file.
PARTLY_MATCHED = "Cannot delete file where some, but not all, rows match filter"
FIELD = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*$")


@dataclass(frozen=True)
class Fit:
    """How a window meets a table's partitioning: `fits` (each file inside or outside it), `cuts`
    (a time transform of the column whose `unit`s the bounds cut, by `field`), or `unknown`
    (no field of the column: Iceberg's check at the commit decides)."""

    verdict: str
    field: str = ""
    unit: str = ""


def parse_field(field: str) -> tuple[str, list[str]]:
    """``months(d)`` -> (``months``, [``d``]); ``bucket(4, id)`` -> (``bucket``, [``4``, ``id``]);
    a bare column is its identity transform. Names lower-cased, back quotes dropped."""
    match = FIELD.match(field)
    if match is None:
        return "identity", [field.strip().strip("`").lower()]
    args = [a.strip().strip("`").lower() for a in match.group(2).split(",")]
    return match.group(1).lower(), args


def on_boundary(unit: str, value: date | datetime) -> bool:
    """Whether `value` starts a period of `unit` as Iceberg counts them: a timestamp with a zone in
    UTC, one without as it is (so as if it were UTC), a date at its midnight. The periods are the
    package's one rule (`instants.period_containing`), read in UTC."""
    if isinstance(value, datetime):
        instant = pendulum.instance(value, tz="UTC")  # a naive value is taken as it is
    else:
        instant = pendulum.datetime(value.year, value.month, value.day, tz="UTC")
    start, _ = period_containing(instant.in_timezone("UTC"), cast(Granularity, unit), pendulum.UTC)
    return start == instant


def window_fit(fields: tuple[str, ...], column: str, start: date | datetime, end: date | datetime) -> Fit:
    """How the window [start, end) of `column` meets the partition `fields` (module docstring):
    `fits` when a field is the column or a time transform of it whose periods both bounds start;
    `cuts` when the column's fields are time transforms whose periods a bound cuts (the first
    named); `unknown` when no field is a function of the column alone."""
    col = column.lower()
    cut: Fit | None = None
    for field in fields:
        transform, args = parse_field(field)
        if transform == "identity" and args == [col]:
            return Fit("fits", field)
        unit = TIME_TRANSFORMS.get(transform)
        if unit is None or args != [col]:
            continue
        if on_boundary(unit, start) and on_boundary(unit, end):
            return Fit("fits", field, unit)
        cut = cut or Fit("cuts", field, unit)
    return cut or Fit("unknown")


def describe_partitioning(fields: tuple[str, ...]) -> str:
    """The partitioning as a sentence's object: ``months(sale_date)``, or ``nothing``."""
    return ", ".join(fields) if fields else "nothing (an unpartitioned table)"

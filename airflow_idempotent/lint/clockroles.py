"""What a clock read in SQL decides: the defect shapes of IDEM001 (issue 35, round 36c).

Of every IDEM001 finding reviewers labelled on public DAG repositories (rounds 1-36: 6 useful of
~200), the useful ones share two shapes, and the harmless ones have neither:

- **the clock's day picks the rows**: the current date compared *for equality* with a row's date
  (``WHERE inserted_at::date = CURRENT_DATE``, ``DATE(created_at) = date('now')``), or with a date
  column in a statement that writes (``DELETE .. WHERE snapshot_date = CURRENT_DATE``): a late or
  retried run after midnight keeps, deletes or loads another day's rows. A range test of current
  state (``CURRENT_DATE BETWEEN valid_from AND valid_to``, ``expiry < now()``, rows still open) is
  no window: a rerun reads the state of its own time;
- **the clock's date files the rows**: the current date, or the clock truncated to a period
  (``date_trunc('week', now())``, ``to_char(CURRENT_DATE, 'YYYYMMDD')``), written as the value of
  rows a table keeps across runs (an insert, merge or upsert): a rerun of last week's run files its
  rows under this week. A timestamp written as-is (``loaded_at = now()``) is a stamp of the write,
  not a period; a table rebuilt whole (``CREATE OR REPLACE``) keeps no other period.

Each test reads the sqlglot node of the clock call; `sqlchecks` and `stamps` decide with them.
"""

from __future__ import annotations

import re

from sqlglot import exp

from airflow_idempotent.lint.benign import written_column

__all__ = ["ADDS_ROWS", "ClockRole", "clock_role", "not_a_defect"]

#: writes that keep rows across runs: a period value written by them files the rows under it
ADDS_ROWS = frozenset({"append", "upsert", "merge", "keyed-insert", "dedup"})
#: functions whose value is a day or a coarser period whatever they are given
_PERIOD_FUNCTIONS = frozenset({"date_trunc", "trunc", "to_date", "date", "last_day", "week", "month", "year"})
#: functions that only format or convert a time value (their first argument)
_FORMATS = frozenset({"to_char", "date_format", "format_date", "strftime", "format_timestamp", "format"})
_DATE_VALUED = frozenset({"curdate", "current_date", "today", "trunc"})
#: a format that keeps the time of day (hours or minutes): the value is a stamp, not a day
_TIME_OF_DAY = re.compile(r"(?i:HH|MI|hh:?mm)|%[HIMSTXRc]")
#: units coarser than a day
_COARSE_UNITS = frozenset({"week", "month", "quarter", "year", "isoweek"})


class ClockRole:
    """What one clock read does in its statement (`clock_role`)."""

    def __init__(self, period: bool, coarse: bool, column: str | None, day_match: str | None) -> None:
        #: the value is a day or a coarser period (CURRENT_DATE, a truncation, a date-only format)
        self.period = period
        #: truncated to a week, month, quarter or year (a period label even in a plain SELECT)
        self.coarse = coarse
        #: the column the (converted) value is written to, if any
        self.column = column
        #: "converted": compared for equality with a row's date reduced to a day; "column": with a
        #: date column as it is; None: no equality with a column
        self.day_match = day_match


def _name(node: exp.Expression) -> str:
    return node.name.lower() if isinstance(node, exp.Anonymous) else type(node).__name__.lower()


def _unit(node: exp.Expression) -> str | None:
    unit = node.args.get("unit")
    if isinstance(unit, exp.Expression):
        return unit.name.lower()
    if isinstance(node, exp.Anonymous) and node.expressions:
        first = node.expressions[0]
        if isinstance(first, exp.Literal) and first.is_string:
            return first.this.lower()
    return None


def _step(parent: exp.Expression, node: exp.Expression) -> tuple[bool, bool, bool] | None:
    """When `parent` only converts `node`: (makes a period, coarser than a day, keeps the time of
    day); None when `parent` is no conversion of it."""
    if isinstance(parent, exp.Cast | exp.TryCast):
        if parent.this is not node:
            return None
        kind = parent.to.this if isinstance(parent.to, exp.DataType) else None
        return kind == exp.DataType.Type.DATE, False, False
    if isinstance(parent, exp.AtTimeZone):
        return (False, False, False) if parent.this is node else None
    if isinstance(parent, exp.TimeToStr):
        fmt = parent.args.get("format")
        keeps_time = isinstance(fmt, exp.Literal) and bool(_TIME_OF_DAY.search(str(fmt.this)))
        return (not keeps_time, False, keeps_time) if parent.this is node else None  # %m is a month
    if isinstance(parent, exp.Date | exp.DateTrunc | exp.TimestampTrunc | exp.TsOrDsToDate | exp.LastDay):
        unit = _unit(parent)
        return True, unit in _COARSE_UNITS, False
    if isinstance(parent, exp.Anonymous):
        name = parent.name.lower()
        if name in _PERIOD_FUNCTIONS:
            return True, _unit(parent) in _COARSE_UNITS or name in ("week", "month", "year"), False
        if name in _FORMATS and parent.expressions and parent.expressions[0] is node:
            fmt = parent.expressions[1] if len(parent.expressions) > 1 else None
            keeps_time = isinstance(fmt, exp.Literal) and bool(_TIME_OF_DAY.search(str(fmt.this)))
            return not keeps_time, False, keeps_time
    return None


def _date_valued(node: exp.Expression) -> bool:
    if isinstance(node, exp.CurrentDate):
        return True
    return isinstance(node, exp.Date | exp.Anonymous) and _name(node) in ("date", *_DATE_VALUED)


def clock_role(node: exp.Expression) -> ClockRole:
    """What the clock read at `node` decides in its statement (module doc)."""
    period, coarse = _date_valued(node), False
    while isinstance(parent := node.parent, exp.Expression):
        step = _step(parent, node)
        if step is None:
            break
        makes, coarser, keeps_time = step
        period = (period or makes) and not keeps_time
        coarse = coarse or coarser
        node = parent
    day_match = None
    parent = node.parent
    if isinstance(parent, exp.EQ):
        other = parent.expression if parent.this is node else parent.this
        if isinstance(other, exp.Column):
            day_match = "column"
        elif other.find(exp.Column) is not None and _reduces_to_day(other):
            day_match = "converted"
    return ClockRole(period, coarse, written_column(node), day_match)


def _reduces_to_day(node: exp.Expression) -> bool:
    """`node` is a column reduced to its day (``x::date``, ``DATE(x)``, ``date_trunc('day', x)``)."""
    if isinstance(node, exp.Cast | exp.TryCast):
        return isinstance(node.to, exp.DataType) and node.to.this == exp.DataType.Type.DATE
    if isinstance(node, exp.Date | exp.TsOrDsToDate | exp.DateTrunc | exp.TimestampTrunc):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in _PERIOD_FUNCTIONS


def not_a_defect(
    filtering: bool, period: bool, coarse: bool, labels: str | None, day_match: str | None, hows: set[str]
) -> str | None:
    """Why a clock read of SQL (not shifted by a span) is information, not IDEM001 (module doc), as
    the end of "`text` reads the clock, but ..."; None when it is one of the defect shapes. `labels`:
    the column its value is written to; `hows`: how the statement writes (empty: it writes no table)."""
    if filtering:
        if day_match == "converted" or (day_match == "column" and hows):
            return None
        return (
            "only as a test of current state (a validity range, a cutoff, rows still open, a row count), "
            "not as the day whose rows a write keeps or deletes: a rerun reads the state of its own time. "
            "It would be a defect if the current date were compared for equality with the rows' date "
            "(WHERE loaded::date = CURRENT_DATE: a late run takes another day's rows)"
        )
    if period and labels is not None and (hows & ADDS_ROWS or (coarse and not hows)):
        return None
    return (
        "its value is a stamp of when the statement ran (not a date or period the rows are filed "
        "under, nor the day that picks them): a rerun writes the same rows stamped at another time. "
        "It would be a defect if the current date, or the clock truncated to a period, were written "
        "as the period of rows a table keeps across runs (week_view = date_trunc('week', now()))"
    )

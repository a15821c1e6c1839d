"""Instants and calendar periods in a time zone: the arithmetic under every window.

Kept apart from `window` (which decides WHICH window a run processes) so the rules for turning
values into instants, and local days into UTC bounds across DST changes, live in one place.
"""

from __future__ import annotations

import datetime
from typing import Literal

import pendulum
from pendulum import DateTime

from airflow_idempotent.errors import WindowError

Granularity = Literal["hour", "day", "week", "month", "year"]
"""A calendar period, floored in the window's time zone (weeks are ISO weeks, starting Monday)."""

Zone = pendulum.Timezone | pendulum.FixedTimezone


def resolve_zone(tz: str) -> Zone:
    """Resolve a zone name once, turning pendulum's error into one that says what to pass instead."""
    try:
        return pendulum.timezone(tz)
    except (ValueError, KeyError, TypeError) as exc:
        raise WindowError(
            f"unknown time zone {tz!r}: use an IANA zone name such as 'UTC' or 'Europe/Paris'"
        ) from exc


def aware_bound(value: object, name: str) -> DateTime:
    """A Window bound must be an aware datetime: a naive one would mean different instants per server."""
    if not isinstance(value, datetime.datetime):
        raise WindowError(
            f"window {name} {value!r} is a {type(value).__name__}, not a datetime: "
            "pass a tz-aware datetime, e.g. pendulum.datetime(2026, 8, 25, tz='UTC')"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise WindowError(
            f"window {name} {value.isoformat()} is naive (no time zone), so it is not one instant: "
            "pass a tz-aware datetime, e.g. pendulum.datetime(2026, 8, 25, tz='UTC')"
        )
    return value if isinstance(value, DateTime) else pendulum.instance(value)


def coerce_instant(value: object, name: str) -> DateTime:
    """Accept what Airflow and tests put in a context: pendulum, stdlib datetime or ISO string.

    Naive values are UTC, because that is how Airflow stores them.
    """
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None and value.utcoffset() is None:
            value = value.replace(tzinfo=None)  # a tzinfo that knows no offset is as good as none
        return pendulum.instance(value, tz="UTC").in_timezone("UTC")
    if isinstance(value, str):
        parsed = parse_iso(value, "UTC")
        if parsed is not None:
            return parsed
        raise WindowError(
            f"context[{name!r}] = {value!r} is not an ISO 8601 date or datetime: "
            "pass a datetime or a string such as '2026-08-25T00:00:00+00:00'"
        )
    raise WindowError(
        f"context[{name!r}] = {value!r} is a {type(value).__name__}, not a datetime: "
        "pass a datetime or an ISO 8601 string such as '2026-08-25T00:00:00+00:00'"
    )


def parse_iso(text: str, tz: str) -> DateTime | None:
    """Parse a date or datetime; None otherwise. exact=True so a bare time ('10:00') is rejected rather
    than silently completed with today's date, and 'now' is refused: either would make the window
    depend on the clock."""
    if text.strip().lower() == "now":  # pendulum.parse reads it as the wall clock
        return None
    try:
        parsed = pendulum.parse(text.strip(), tz=tz, exact=True)
    except (ValueError, TypeError):
        return None
    if isinstance(parsed, DateTime):
        return parsed.in_timezone("UTC")
    if isinstance(parsed, pendulum.Date):
        return midnight(parsed, resolve_zone(tz)).in_timezone("UTC")
    return None


def period_containing(instant: DateTime, unit: Granularity, zone: Zone) -> tuple[DateTime, DateTime]:
    local = instant.in_timezone(zone)
    if unit == "hour":
        # replace() keeps the fold, so the repeated hour of a DST change floors to the right instant.
        floor = local.replace(minute=0, second=0, microsecond=0)
        return floor, shift(floor, datetime.timedelta(hours=1)).in_timezone(zone)
    day = pendulum.date(local.year, local.month, local.day)
    if unit == "day":
        first, after = day, day.add(days=1)
    elif unit == "week":
        first = day.subtract(days=day.weekday())  # ISO week: Monday, regardless of pendulum's settings
        after = first.add(days=7)
    elif unit == "month":
        first = pendulum.date(day.year, day.month, 1)
        after = first.add(months=1)
    else:
        first = pendulum.date(day.year, 1, 1)
        after = first.add(years=1)
    return midnight(first, zone), midnight(after, zone)


def midnight(day: datetime.date, zone: Zone) -> DateTime:
    """Start of a local day. Built from the date (not by adding days) so DST days get 23 or 25 hours,
    and in zones where midnight is skipped the day starts at the first instant that exists."""
    return pendulum.datetime(day.year, day.month, day.day, tz=zone)


def is_local_midnight(bound: DateTime, tz: str) -> bool:
    local = bound.in_timezone(tz)
    # Compared in UTC: same-zone comparison would ignore the fold (see Window).
    return local.in_timezone("UTC") == midnight(local.date(), resolve_zone(tz)).in_timezone("UTC")


def shift(instant: DateTime, delta: datetime.timedelta) -> DateTime:
    """Exact elapsed-time arithmetic (in UTC), unlike pendulum's calendar-aware add(days=...)."""
    return instant.in_timezone("UTC") + delta


def naive(local: DateTime) -> datetime.datetime:
    return datetime.datetime(
        local.year,
        local.month,
        local.day,
        local.hour,
        local.minute,
        local.second,
        local.microsecond,
        fold=local.fold,
    )

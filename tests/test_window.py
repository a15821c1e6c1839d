"""Tests for airflow_idempotent.window: every rule, every error, DST and calendar edges.

Expected values are literal dates written by hand, never computed with the code under test.
"""

from __future__ import annotations

import datetime
import logging
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_idempotent import window as window_module
from airflow_idempotent.errors import WindowError
from airflow_idempotent.window import Window, parse_granularity, window_from_context

UTC = datetime.timezone.utc
PARIS = "Europe/Paris"


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> pendulum.DateTime:
    return pendulum.datetime(year, month, day, hour, minute, second, tz="UTC")


def paris(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> pendulum.DateTime:
    return pendulum.datetime(year, month, day, hour, minute, tz=PARIS)


def assert_bounds(w: Window, start: str, end: str) -> None:
    """Compare with literal ISO strings in the window's zone: checks the instant AND the local offset."""
    assert w.start.in_timezone(w.tz).isoformat() == start
    assert w.end.in_timezone(w.tz).isoformat() == end


# --------------------------------------------------------------------------- parse_granularity


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("hour", "hour"),
        ("hourly", "hour"),
        ("day", "day"),
        ("Daily", "day"),
        ("WEEK", "week"),
        ("weekly", "week"),
        ("month", "month"),
        (" monthly ", "month"),
        ("year", "year"),
        ("yearly", "year"),
    ],
)
def test_parse_granularity_named_units(raw: str, expected: str) -> None:
    assert parse_granularity(raw) == expected


def test_parse_granularity_none_means_not_declared() -> None:
    assert parse_granularity(None) is None


def test_parse_granularity_fixed_widths() -> None:
    assert parse_granularity(datetime.timedelta(minutes=15)) == datetime.timedelta(minutes=15)
    assert parse_granularity(pendulum.duration(hours=6)) == datetime.timedelta(hours=6)


@pytest.mark.parametrize("raw", ["1d", "1h", "minute", "days", "", "@daily"])
def test_parse_granularity_rejects_unknown_strings_listing_accepted(raw: str) -> None:
    with pytest.raises(WindowError) as exc:
        parse_granularity(raw)
    msg = str(exc.value)
    assert "unknown granularity" in msg
    for accepted in ("'hour'", "'day'", "'week'", "'month'", "'year'", "'daily'", "timedelta"):
        assert accepted in msg


@pytest.mark.parametrize("raw", [datetime.timedelta(0), datetime.timedelta(hours=-1)])
def test_parse_granularity_rejects_non_positive_timedelta(raw: datetime.timedelta) -> None:
    with pytest.raises(WindowError, match=r"not positive.*positive datetime\.timedelta"):
        parse_granularity(raw)


def test_parse_granularity_rejects_duration_with_months() -> None:
    with pytest.raises(WindowError, match=r"no fixed width.*granularity='month'"):
        parse_granularity(pendulum.duration(months=1))


def test_parse_granularity_rejects_other_types() -> None:
    with pytest.raises(WindowError, match=r"is a int: use 'hour'"):
        parse_granularity(1)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- Window


def test_window_rejects_empty() -> None:
    with pytest.raises(WindowError) as exc:
        Window(utc(2026, 8, 25), utc(2026, 8, 25), source="granularity")
    assert "is not after its start" in str(exc.value)
    assert "end > start" in str(exc.value)


def test_window_rejects_reversed() -> None:
    with pytest.raises(WindowError, match="is not after its start"):
        Window(utc(2026, 8, 26), utc(2026, 8, 25), source="granularity")


@pytest.mark.parametrize("bound", ["start", "end"])
def test_window_rejects_naive_bounds(bound: str) -> None:
    aware = {"start": utc(2026, 8, 25), "end": utc(2026, 8, 26)}
    aware[bound] = datetime.datetime(2026, 8, 25 if bound == "start" else 26)  # type: ignore[assignment]
    with pytest.raises(WindowError) as exc:
        Window(aware["start"], aware["end"], source="granularity")
    assert f"window {bound}" in str(exc.value)
    assert "naive" in str(exc.value)
    assert "tz-aware" in str(exc.value)


def test_window_rejects_non_datetime() -> None:
    with pytest.raises(WindowError, match="is a str, not a datetime: pass a tz-aware datetime"):
        Window("2026-08-25", utc(2026, 8, 26), source="granularity")  # type: ignore[arg-type]


def test_window_rejects_unknown_zone() -> None:
    with pytest.raises(WindowError, match=r"unknown time zone 'Mars/Olympus'.*'Europe/Paris'"):
        Window(utc(2026, 8, 25), utc(2026, 8, 26), source="granularity", tz="Mars/Olympus")


def test_window_accepts_stdlib_aware_and_stores_utc() -> None:
    w = Window(
        datetime.datetime(2026, 8, 24, 22, tzinfo=UTC),  # type: ignore[arg-type]
        datetime.datetime(2026, 8, 25, 22, tzinfo=UTC),  # type: ignore[arg-type]
        source="data_interval",
        tz=PARIS,
    )
    assert isinstance(w.start, pendulum.DateTime)
    assert isinstance(w.end, pendulum.DateTime)
    assert w.start.isoformat() == "2026-08-24T22:00:00+00:00"
    assert w.end.isoformat() == "2026-08-25T22:00:00+00:00"
    assert_bounds(w, "2026-08-25T00:00:00+02:00", "2026-08-26T00:00:00+02:00")
    assert w == Window(paris(2026, 8, 25), paris(2026, 8, 26), source="data_interval", tz=PARIS)


def test_window_is_frozen() -> None:
    w = Window(utc(2026, 8, 25), utc(2026, 8, 26), source="granularity")
    with pytest.raises(AttributeError):
        w.start = utc(2026, 8, 24)  # type: ignore[misc]


def test_date_aligned_dates() -> None:
    w = Window(paris(2026, 8, 1), paris(2026, 9, 1), source="granularity", tz=PARIS)
    assert w.is_date_aligned
    assert w.start_date() == datetime.date(2026, 8, 1)
    assert w.end_date() == datetime.date(2026, 9, 1)
    assert type(w.start_date()) is datetime.date


def test_alignment_is_read_in_the_window_zone() -> None:
    # Midnight in Paris is 22:00 UTC: aligned in Paris, not in UTC.
    assert Window(paris(2026, 8, 25), paris(2026, 8, 26), source="x", tz=PARIS).is_date_aligned
    assert not Window(paris(2026, 8, 25), paris(2026, 8, 26), source="x", tz="UTC").is_date_aligned


@pytest.mark.parametrize(
    ("start", "end", "bad"),
    [
        (utc(2026, 8, 25, 10), utc(2026, 8, 26), "start"),
        (utc(2026, 8, 25), utc(2026, 8, 25, 13), "end"),
    ],
)
def test_date_of_unaligned_bound_names_the_bound_and_fix(
    start: pendulum.DateTime, end: pendulum.DateTime, bad: str
) -> None:
    w = Window(start, end, source="data_interval")
    assert not w.is_date_aligned
    getter = w.start_date if bad == "start" else w.end_date
    with pytest.raises(WindowError) as exc:
        getter()
    msg = str(exc.value)
    assert f"the window's {bad} " in msg
    assert "is not at midnight in UTC" in msg
    assert "granularity='day'" in msg
    assert "window.start / window.end" in msg


def test_naive_bounds_are_local_wall_time_plain_datetimes() -> None:
    w = Window(utc(2026, 8, 25, 8), utc(2026, 8, 25, 9, 30), source="data_interval", tz=PARIS)
    assert w.naive_start() == datetime.datetime(2026, 8, 25, 10, 0)
    assert w.naive_end() == datetime.datetime(2026, 8, 25, 11, 30)
    for value in (w.naive_start(), w.naive_end()):
        assert type(value) is datetime.datetime
        assert value.tzinfo is None


def test_label_one_day() -> None:
    assert Window(utc(2026, 8, 25), utc(2026, 8, 26), source="granularity").label() == "2026-08-25"


def test_label_multi_day_is_half_open() -> None:
    w = Window(paris(2026, 8, 1), paris(2026, 9, 1), source="granularity", tz=PARIS)
    assert w.label() == "[2026-08-01, 2026-09-01)"


def test_label_unaligned_is_utc_timestamps() -> None:
    w = Window(paris(2026, 8, 25, 10), paris(2026, 8, 25, 11), source="granularity", tz=PARIS)
    assert w.label() == "[2026-08-25T08:00:00+00:00, 2026-08-25T09:00:00+00:00)"


def test_label_is_stable() -> None:
    # Same window built from pendulum, stdlib and another offset, different source: one label.
    a = Window(utc(2026, 8, 25, 10), utc(2026, 8, 25, 11), source="data_interval")
    b = Window(
        datetime.datetime(2026, 8, 25, 10, tzinfo=UTC),  # type: ignore[arg-type]
        datetime.datetime(2026, 8, 25, 11, tzinfo=UTC),  # type: ignore[arg-type]
        source="granularity",
    )
    c = Window(paris(2026, 8, 25, 12), paris(2026, 8, 25, 13), source="partition_key", tz=PARIS)
    assert a.label() == b.label() == c.label() == "[2026-08-25T10:00:00+00:00, 2026-08-25T11:00:00+00:00)"
    assert a.label() == a.label()


def test_template_vars_date_aligned() -> None:
    w = Window(paris(2026, 8, 25), paris(2026, 8, 26), source="granularity", tz=PARIS)
    assert w.template_vars() == {"window": w, "window_start": "2026-08-25", "window_end": "2026-08-26"}


def test_template_vars_timestamps_with_offset() -> None:
    w = Window(utc(2026, 8, 25, 8), utc(2026, 8, 25, 9), source="granularity", tz=PARIS)
    tv = w.template_vars()
    assert tv["window"] is w
    assert tv["window_start"] == "2026-08-25T10:00:00+02:00"
    assert tv["window_end"] == "2026-08-25T11:00:00+02:00"
    assert set(tv) == {"window", "window_start", "window_end"}


# --------------------------------------------------------------------------- rule 1: partitions


def test_partition_date_with_day_granularity() -> None:
    ctx = {"partition_key": "2026-08-25", "partition_date": utc(2026, 8, 25, 13, 45)}
    w = window_from_context(ctx, granularity="day")
    assert w.source == "partition_key"
    assert_bounds(w, "2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00+00:00")


def test_partition_key_parsed_in_timezone() -> None:
    w = window_from_context({"partition_key": "2026-08-25", "partition_date": None}, "daily", timezone=PARIS)
    assert w.source == "partition_key"
    assert w.tz == PARIS
    assert_bounds(w, "2026-08-25T00:00:00+02:00", "2026-08-26T00:00:00+02:00")


def test_partition_key_hour() -> None:
    w = window_from_context({"partition_key": "2026-08-25T10"}, granularity="hour")
    assert_bounds(w, "2026-08-25T10:00:00+00:00", "2026-08-25T11:00:00+00:00")


def test_partition_key_month() -> None:
    w = window_from_context({"partition_key": "2026-08"}, granularity="month")
    assert_bounds(w, "2026-08-01T00:00:00+00:00", "2026-09-01T00:00:00+00:00")


def test_partition_key_with_timedelta_granularity_starts_at_partition() -> None:
    w = window_from_context({"partition_key": "2026-08-25T10:15:00+00:00"}, datetime.timedelta(minutes=15))
    assert_bounds(w, "2026-08-25T10:15:00+00:00", "2026-08-25T10:30:00+00:00")


def test_partition_preferred_over_data_interval() -> None:
    ctx = {
        "partition_key": "2026-08-25",
        "data_interval_start": utc(2026, 1, 1),
        "data_interval_end": utc(2026, 2, 1),
        "logical_date": utc(2026, 1, 1),
    }
    w = window_from_context(ctx, granularity="day")
    assert w.source == "partition_key"
    assert w.label() == "2026-08-25"


@pytest.mark.parametrize("key", ["us", "us|2026-08-25T10", "10:00", "P1D"])
def test_unparseable_partition_key_names_the_key(key: str) -> None:
    with pytest.raises(WindowError) as exc:
        window_from_context({"partition_key": key, "partition_date": None}, granularity="day")
    msg = str(exc.value)
    assert f"partition_key {key!r} is not a date or datetime" in msg
    assert "'2026-08-25'" in msg


def test_partition_without_granularity() -> None:
    with pytest.raises(WindowError) as exc:
        window_from_context({"partition_key": "2026-08-25", "partition_date": utc(2026, 8, 25)})
    msg = str(exc.value)
    assert "partitioned run (partition_key='2026-08-25')" in msg
    assert "declares no granularity" in msg
    assert "granularity='day'" in msg


def test_none_partition_falls_through_to_data_interval() -> None:
    ctx = {
        "partition_key": None,
        "partition_date": None,
        "data_interval_start": utc(2026, 8, 25),
        "data_interval_end": utc(2026, 8, 26),
    }
    assert window_from_context(ctx).source == "data_interval"


# --------------------------------------------------------------------------- rule 2: data interval


def test_data_interval_with_width() -> None:
    ctx = {
        "data_interval_start": utc(2026, 8, 25),
        "data_interval_end": utc(2026, 8, 26),
        "logical_date": utc(2026, 8, 25),
    }
    w = window_from_context(ctx)
    assert w.source == "data_interval"
    assert w.tz == "UTC"
    assert_bounds(w, "2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00+00:00")


def test_data_interval_preferred_over_granularity() -> None:
    ctx = {
        "data_interval_start": utc(2026, 8, 25, 6),
        "data_interval_end": utc(2026, 8, 25, 18),
        "logical_date": utc(2026, 8, 25, 6),
    }
    w = window_from_context(ctx, granularity="month", anchor="end")
    assert w.source == "data_interval"
    assert w.label() == "[2026-08-25T06:00:00+00:00, 2026-08-25T18:00:00+00:00)"


def test_data_interval_keeps_instants_and_sets_tz() -> None:
    ctx = {"data_interval_start": utc(2026, 8, 24, 22), "data_interval_end": utc(2026, 8, 25, 22)}
    w = window_from_context(ctx, timezone=PARIS)
    assert w.tz == PARIS
    assert w.start == utc(2026, 8, 24, 22)
    assert w.end == utc(2026, 8, 25, 22)
    assert w.label() == "2026-08-25"


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (datetime.datetime(2026, 8, 25, tzinfo=UTC), datetime.datetime(2026, 8, 26, tzinfo=UTC)),
        ("2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00Z"),
        ("2026-08-25", "2026-08-26"),
        (datetime.datetime(2026, 8, 25), datetime.datetime(2026, 8, 26)),  # naive: read as UTC
        ("2026-08-25T02:00:00+02:00", datetime.datetime(2026, 8, 26)),
    ],
)
def test_data_interval_value_types(start: Any, end: Any) -> None:
    w = window_from_context({"data_interval_start": start, "data_interval_end": end})
    assert isinstance(w.start, pendulum.DateTime)
    assert_bounds(w, "2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00+00:00")


def test_reversed_data_interval() -> None:
    ctx = {"data_interval_start": utc(2026, 8, 26), "data_interval_end": utc(2026, 8, 25)}
    with pytest.raises(WindowError) as exc:
        window_from_context(ctx, granularity="day")
    msg = str(exc.value)
    assert "data_interval_end 2026-08-25T00:00:00+00:00 is before data_interval_start" in msg
    assert "fix the timetable" in msg


def test_unparseable_context_string() -> None:
    ctx = {"data_interval_start": "yesterday", "data_interval_end": utc(2026, 8, 26)}
    with pytest.raises(
        WindowError, match=r"context\['data_interval_start'\] = 'yesterday' is not an ISO 8601"
    ):
        window_from_context(ctx)


def test_context_value_of_wrong_type() -> None:
    with pytest.raises(WindowError, match=r"context\['logical_date'\] = 20260825 is a int, not a datetime"):
        window_from_context({"logical_date": 20260825}, granularity="day")


# --------------------------------------------------------------------------- rule 3: logical date


def test_zero_width_interval_with_granularity() -> None:
    ctx = {
        "data_interval_start": utc(2026, 8, 25),
        "data_interval_end": utc(2026, 8, 25),
        "logical_date": utc(2026, 8, 25),
    }
    w = window_from_context(ctx, granularity="day")
    assert w.source == "granularity"
    assert_bounds(w, "2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00+00:00")


def test_no_interval_with_granularity() -> None:
    w = window_from_context({"logical_date": utc(2026, 8, 25, 13, 5)}, granularity="hour")
    assert w.source == "granularity"
    assert_bounds(w, "2026-08-25T13:00:00+00:00", "2026-08-25T14:00:00+00:00")


@pytest.mark.parametrize(
    ("granularity", "logical", "start", "end"),
    [
        ("hour", utc(2026, 8, 25, 13, 59, 59), "2026-08-25T13:00:00+00:00", "2026-08-25T14:00:00+00:00"),
        ("day", utc(2026, 8, 25, 23, 59), "2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00+00:00"),
        # 2026-08-30 is a Sunday: its ISO week starts Monday 2026-08-24.
        ("week", utc(2026, 8, 30, 12), "2026-08-24T00:00:00+00:00", "2026-08-31T00:00:00+00:00"),
        # A Monday is the first day of its own week.
        ("week", utc(2026, 8, 31), "2026-08-31T00:00:00+00:00", "2026-09-07T00:00:00+00:00"),
        # A week straddling a year end.
        ("week", utc(2027, 1, 1), "2026-12-28T00:00:00+00:00", "2027-01-04T00:00:00+00:00"),
        ("month", utc(2026, 8, 25), "2026-08-01T00:00:00+00:00", "2026-09-01T00:00:00+00:00"),
        ("month", utc(2026, 12, 31, 23), "2026-12-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
        ("month", utc(2028, 2, 29), "2028-02-01T00:00:00+00:00", "2028-03-01T00:00:00+00:00"),
        ("year", utc(2026, 8, 25), "2026-01-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
    ],
)
def test_floors_with_anchor_start(granularity: str, logical: pendulum.DateTime, start: str, end: str) -> None:
    w = window_from_context({"logical_date": logical}, granularity=granularity)
    assert_bounds(w, start, end)


@pytest.mark.parametrize(
    ("granularity", "logical", "start", "end"),
    [
        # On a boundary: the period that just ended.
        ("day", utc(2026, 8, 26), "2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00+00:00"),
        ("hour", utc(2026, 8, 26), "2026-08-25T23:00:00+00:00", "2026-08-26T00:00:00+00:00"),
        ("week", utc(2026, 8, 31), "2026-08-24T00:00:00+00:00", "2026-08-31T00:00:00+00:00"),
        ("month", utc(2026, 3, 1), "2026-02-01T00:00:00+00:00", "2026-03-01T00:00:00+00:00"),
        ("year", utc(2027, 1, 1), "2026-01-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
        # Off a boundary: the period ending at the floor of the logical date.
        ("day", utc(2026, 8, 26, 7, 30), "2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00+00:00"),
        ("month", utc(2026, 1, 15), "2025-12-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00"),
    ],
)
def test_anchor_end(granularity: str, logical: pendulum.DateTime, start: str, end: str) -> None:
    w = window_from_context({"logical_date": logical}, granularity=granularity, anchor="end")
    assert w.source == "granularity"
    assert_bounds(w, start, end)


def test_timedelta_granularity_is_not_floored() -> None:
    ld = utc(2026, 8, 25, 10, 7)
    start = window_from_context({"logical_date": ld}, datetime.timedelta(minutes=30))
    assert_bounds(start, "2026-08-25T10:07:00+00:00", "2026-08-25T10:37:00+00:00")
    end = window_from_context({"logical_date": ld}, datetime.timedelta(minutes=30), anchor="end")
    assert_bounds(end, "2026-08-25T09:37:00+00:00", "2026-08-25T10:07:00+00:00")


def test_timedelta_granularity_is_exact_elapsed_time_across_dst() -> None:
    # Paris springs forward on 2026-03-29: 24 elapsed hours from noon end at 13:00 local.
    w = window_from_context({"logical_date": paris(2026, 3, 28, 12)}, datetime.timedelta(days=1), PARIS)
    assert_bounds(w, "2026-03-28T12:00:00+01:00", "2026-03-29T13:00:00+02:00")


def test_day_floor_in_timezone() -> None:
    # 23:30 UTC on the 25th is already the 26th in Paris.
    w = window_from_context({"logical_date": utc(2026, 8, 25, 23, 30)}, granularity="day", timezone=PARIS)
    assert w.tz == PARIS
    assert_bounds(w, "2026-08-26T00:00:00+02:00", "2026-08-27T00:00:00+02:00")
    assert w.label() == "2026-08-26"


def test_dst_spring_forward_day_is_23_hours() -> None:
    w = window_from_context({"logical_date": paris(2026, 3, 29, 12)}, granularity="day", timezone=PARIS)
    assert_bounds(w, "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00")
    assert (w.end - w.start).in_hours() == 23
    assert w.is_date_aligned
    assert w.label() == "2026-03-29"


def test_dst_fall_back_day_is_25_hours() -> None:
    w = window_from_context({"logical_date": paris(2026, 10, 25, 12)}, granularity="day", timezone=PARIS)
    assert_bounds(w, "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00")
    assert (w.end - w.start).in_hours() == 25
    assert w.template_vars()["window_start"] == "2026-10-25"
    assert w.template_vars()["window_end"] == "2026-10-26"


def test_dst_anchor_end_previous_day() -> None:
    w = window_from_context(
        {"logical_date": paris(2026, 10, 26)}, granularity="day", timezone=PARIS, anchor="end"
    )
    assert_bounds(w, "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00")


def test_dst_repeated_hour_floors_to_the_right_instant() -> None:
    # 00:30 UTC and 01:30 UTC are both 02:30 local on 2026-10-25 (CEST, then CET).
    first = window_from_context({"logical_date": utc(2026, 10, 25, 0, 30)}, "hour", PARIS)
    second = window_from_context({"logical_date": utc(2026, 10, 25, 1, 30)}, "hour", PARIS)
    assert_bounds(first, "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00")
    assert_bounds(second, "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00")
    assert first.label() != second.label()
    assert first != second
    assert first.end == second.start


def test_window_in_the_repeated_hour_is_not_empty() -> None:
    # Same wall time, same zone, different folds: still one hour apart as instants.
    start = utc(2026, 10, 25, 0).in_timezone(PARIS)
    end = utc(2026, 10, 25, 1).in_timezone(PARIS)
    w = Window(start, end, source="granularity", tz=PARIS)
    assert w.naive_start() == datetime.datetime(2026, 10, 25, 2, 0)
    assert w.naive_end() == datetime.datetime(2026, 10, 25, 2, 0, fold=1)
    assert w.label() == "[2026-10-25T00:00:00+00:00, 2026-10-25T01:00:00+00:00)"


def test_day_whose_midnight_does_not_exist() -> None:
    # Santiago skips 00:00-01:00 on 2026-09-06: that day starts at 01:00 and is still one date.
    w = window_from_context({"logical_date": "2026-09-06T12:00:00-03:00"}, "day", "America/Santiago")
    assert_bounds(w, "2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00")
    assert w.is_date_aligned
    assert w.label() == "2026-09-06"


def test_month_in_timezone() -> None:
    w = window_from_context({"logical_date": utc(2026, 10, 31, 23, 30)}, "month", PARIS)
    # 23:30 UTC on Oct 31 is Nov 1 00:30 in Paris.
    assert_bounds(w, "2026-11-01T00:00:00+01:00", "2026-12-01T00:00:00+01:00")
    assert w.label() == "[2026-11-01, 2026-12-01)"


def test_missing_logical_date_names_cause_and_fix() -> None:
    ctx = {"logical_date": None, "dag": SimpleNamespace(dag_id="payouts_overwrite")}
    with pytest.raises(WindowError) as exc:
        window_from_context(ctx, granularity="day")
    msg = str(exc.value)
    assert "no logical date" in msg
    assert "`airflow dags trigger payouts_overwrite --logical-date 2026-08-25`" in msg


def test_missing_logical_date_without_dag_in_context() -> None:
    with pytest.raises(WindowError, match=r"airflow dags trigger <dag_id> --logical-date"):
        window_from_context({})


def test_zero_width_without_granularity_explains_cron_timetable() -> None:
    ctx = {
        "data_interval_start": utc(2026, 8, 25),
        "data_interval_end": utc(2026, 8, 25),
        "logical_date": utc(2026, 8, 25),
    }
    with pytest.raises(WindowError) as exc:
        window_from_context(ctx)
    msg = str(exc.value)
    assert "data interval is empty" in msg
    assert "@daily" in msg
    assert "granularity='day'" in msg
    assert "timetable that has a data interval" in msg


def test_no_interval_without_granularity() -> None:
    with pytest.raises(WindowError) as exc:
        window_from_context({"logical_date": utc(2026, 8, 25)})
    msg = str(exc.value)
    assert "no data interval" in msg
    assert "granularity='day'" in msg


def test_bad_anchor() -> None:
    with pytest.raises(
        WindowError, match=r"anchor='middle' is not valid: use anchor='start' or anchor='end'"
    ):
        window_from_context({"logical_date": utc(2026, 8, 25)}, "day", anchor="middle")  # type: ignore[arg-type]


def test_bad_timezone() -> None:
    with pytest.raises(WindowError, match=r"unknown time zone 'Paris'.*IANA"):
        window_from_context({"logical_date": utc(2026, 8, 25)}, "day", timezone="Paris")


def test_bad_granularity_via_context() -> None:
    with pytest.raises(WindowError, match=r"unknown granularity 'fortnight'"):
        window_from_context({"logical_date": utc(2026, 8, 25)}, "fortnight")


def test_same_context_gives_same_window() -> None:
    ctx = {"logical_date": "2026-08-25T00:00:00+00:00"}
    a = window_from_context(ctx, "day")
    b = window_from_context(ctx, "day")
    assert a == b
    assert a.label() == b.label() == "2026-08-25"


# --------------------------------------------------------------------------- logging and purity


@pytest.mark.parametrize(
    ("ctx", "granularity", "phrase"),
    [
        ({"partition_key": "2026-08-25"}, "day", "from the partition"),
        (
            {"data_interval_start": utc(2026, 8, 25), "data_interval_end": utc(2026, 8, 26)},
            None,
            "data interval",
        ),
        ({"logical_date": utc(2026, 8, 25)}, "day", "from the logical date"),
    ],
)
def test_logs_which_rule_produced_the_window(
    caplog: pytest.LogCaptureFixture, ctx: dict[str, Any], granularity: str | None, phrase: str
) -> None:
    with caplog.at_level(logging.INFO, logger="airflow_idempotent.window"):
        window_from_context(ctx, granularity)
    messages = [r.getMessage() for r in caplog.records if r.name == "airflow_idempotent.window"]
    assert any(phrase in m and "2026-08-25" in m for m in messages), messages


def test_module_never_reads_the_clock() -> None:
    source = Path(window_module.__file__).read_text(encoding="utf-8")
    for forbidden in ("now(", "today(", "utcnow"):
        assert forbidden not in source, forbidden
    # `time.time` as its own name: "datetime.timedelta" contains the substring and is fine.
    assert not re.search(r"(?<![\w.])time\.time", source)
    assert not re.search(r"^\s*(import time|from time import)\b", source, re.MULTILINE)

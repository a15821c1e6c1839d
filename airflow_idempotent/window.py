"""Turn an Airflow run's template context into the half-open window [start, end) it processes.

This is the only place windows are derived, so every operator agrees on what "this run's data" is.
It never reads the clock: a rerun of the same run, next minute or next year, must get the same window.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from pendulum import DateTime

from airflow_idempotent.errors import WindowError
from airflow_idempotent.instants import (
    Granularity,
    Zone,
    aware_bound,
    coerce_instant,
    is_local_midnight,
    midnight,
    naive,
    parse_iso,
    period_containing,
    resolve_zone,
    shift,
)

log = logging.getLogger(__name__)

ParsedGranularity = Granularity | datetime.timedelta
"""What `parse_granularity` returns: a calendar unit, or a fixed width (timedelta or pendulum.Duration)."""

Anchor = Literal["start", "end"]

_UNITS: dict[str, Granularity] = {
    "hour": "hour",
    "hourly": "hour",
    "day": "day",
    "daily": "day",
    "week": "week",
    "weekly": "week",
    "month": "month",
    "monthly": "month",
    "year": "year",
    "yearly": "year",
}
_ACCEPTED = (
    "'hour', 'day', 'week', 'month' or 'year' (or 'hourly', 'daily', 'weekly', 'monthly', 'yearly'), "
    "or a positive datetime.timedelta"
)
_ZERO = datetime.timedelta(0)
TICK = datetime.timedelta(microseconds=1)


#: The widest each calendar period can be (a day or longer may gain a DST hour).
_WIDEST: dict[str, datetime.timedelta] = {
    "hour": datetime.timedelta(hours=1),
    "day": datetime.timedelta(days=1, hours=1),
    "week": datetime.timedelta(days=7, hours=1),
    "month": datetime.timedelta(days=31, hours=1),
    "year": datetime.timedelta(days=366, hours=1),
}


def widest(granularity: str | datetime.timedelta | None) -> datetime.timedelta | None:
    """The widest one period of `granularity` can be (None: not declared): what bounds a window
    "at most N periods wide" without walking the calendar."""
    parsed = parse_granularity(granularity)
    if parsed is None:
        return None
    return _WIDEST[parsed] if isinstance(parsed, str) else parsed


@dataclass(frozen=True)
class Window:
    """The half-open interval [start, end) one run reads and rewrites.

    Half-open so adjacent windows tile time with no gap and no overlap. Bounds are stored in UTC:
    Python compares two datetimes of the same zone by wall time, ignoring DST folds, so local bounds
    would make the two 02:00-03:00 hours of a fall-back night compare equal. `tz` is the zone dates
    and local times are read in (start_date, naive_start, template_vars).
    """

    start: DateTime
    end: DateTime
    source: str
    tz: str = "UTC"

    def __post_init__(self) -> None:
        """Reject empty, reversed or naive windows here, so no caller ever has to re-check."""
        resolve_zone(self.tz)
        start = aware_bound(self.start, "start").in_timezone("UTC")
        end = aware_bound(self.end, "end").in_timezone("UTC")
        if end <= start:
            raise WindowError(
                f"window end {end.isoformat()} is not after its start {start.isoformat()}: a window is "
                "half-open [start, end), so it would hold no data (or be reversed); fix the data interval, "
                "partition or granularity that produced it so that end > start"
            )
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)

    @cached_property
    def is_date_aligned(self) -> bool:
        """Both bounds fall at local midnight in `tz`, so the window is a whole number of dates.

        Cached, as `label` is: the window is frozen, and a write read them 7 times per call (47 us
        a label, four zone conversions each: 0.3 ms of every write's fixed cost)."""
        return is_local_midnight(self.start, self.tz) and is_local_midnight(self.end, self.tz)

    def start_date(self) -> datetime.date:
        """First date in the window (inclusive), for DATE partition columns."""
        return self._bound_date(self.start, "start")

    def end_date(self) -> datetime.date:
        """First date after the window (exclusive): filter with `d >= start_date AND d < end_date`."""
        return self._bound_date(self.end, "end")

    def naive_start(self) -> datetime.datetime:
        """Local wall time of start in `tz` without tzinfo, for TIMESTAMP WITHOUT TIME ZONE columns."""
        return naive(self.start.in_timezone(self.tz))

    def naive_end(self) -> datetime.datetime:
        """Local wall time of end in `tz` without tzinfo (exclusive bound)."""
        return naive(self.end.in_timezone(self.tz))

    def label(self) -> str:
        """A stable, human-readable key for locks and run history.

        - one date-aligned day: ``2026-08-25``
        - several date-aligned days: ``[2026-08-01, 2026-09-01)`` (half-open, end exclusive)
        - otherwise: ``[2026-08-25T10:00:00+00:00, 2026-08-25T11:00:00+00:00)``, always in UTC so the
          same instants give the same key whatever zone they were read in.

        Dates are local dates in `tz`. The label depends only on (start, end, tz), never on `source`.
        """
        return self._label

    @cached_property
    def _label(self) -> str:
        """`label`'s text, computed once per window (start, end and tz never change)."""
        if self.is_date_aligned:
            first, after = self.start_date(), self.end_date()
            if after - first == datetime.timedelta(days=1):
                return first.isoformat()
            return f"[{first.isoformat()}, {after.isoformat()})"
        return f"[{self.start.isoformat()}, {self.end.isoformat()})"

    def template_vars(self) -> dict[str, Any]:
        """Values for Jinja/SQL: ``window_start``/``window_end`` as 'YYYY-MM-DD' if date aligned, else
        ISO 8601 timestamps with the offset of `tz`, so SQL never compares against an ambiguous string.
        """
        if self.is_date_aligned:
            start, end = self.start_date().isoformat(), self.end_date().isoformat()
        else:
            start = self.start.in_timezone(self.tz).isoformat()
            end = self.end.in_timezone(self.tz).isoformat()
        return {"window": self, "window_start": start, "window_end": end}

    def _bound_date(self, bound: DateTime, name: str) -> datetime.date:
        local = bound.in_timezone(self.tz)
        if not is_local_midnight(local, self.tz):
            raise WindowError(
                f"the window's {name} {local.isoformat()} is not at midnight in {self.tz}, so it is not a "
                f"date: use granularity='day' (or week/month/year), a data interval whose bounds are at "
                f"midnight in {self.tz}, or timezone=<the zone your dates are in>; or compare the column "
                "with the timestamps window.start / window.end instead of dates"
            )
        return datetime.date(local.year, local.month, local.day)


def parse_granularity(value: str | datetime.timedelta | None) -> ParsedGranularity | None:
    """Normalise a user's granularity; None means "not declared" and is returned as is.

    Kept deliberately small (named units and their -ly forms) so a typo fails loudly instead of
    silently meaning something else.
    """
    if value is None:
        return None
    if isinstance(value, str):
        unit = _UNITS.get(value.strip().lower())
        if unit is None:
            raise WindowError(f"unknown granularity {value!r}: use {_ACCEPTED}")
        return unit
    if isinstance(value, datetime.timedelta):
        if getattr(value, "years", 0) or getattr(value, "months", 0):
            raise WindowError(
                f"granularity {value!r} has months or years, which have no fixed width: "
                "use granularity='month' or 'year' (calendar periods) instead"
            )
        if value <= _ZERO:
            raise WindowError(
                f"granularity {value!r} is not positive, so the window would be empty: use {_ACCEPTED}"
            )
        return value
    raise WindowError(f"granularity {value!r} is a {type(value).__name__}: use {_ACCEPTED}")


def check_timezone(name: str) -> str:
    """`name` if windows can be read in it (an IANA zone), else the WindowError a window would give:
    so a declaration (e.g. the guard's) is refused where it is made, by the windows' own rule."""
    resolve_zone(name)
    return name


def check_anchor(anchor: object) -> Anchor:
    """`anchor` if it is "start" or "end", else the WindowError a window would give."""
    if anchor == "start":
        return "start"
    if anchor == "end":
        return "end"
    raise WindowError(f"anchor={anchor!r} is not valid: use anchor='start' or anchor='end'")


#: The most earlier periods one write may rewrite (a year of days): more is a backfill, not late data.
MAX_LOOKBACK = 366


def check_lookback(lookback: object, granularity: str | datetime.timedelta | None) -> int:
    """`lookback` if it is a whole number 0..MAX_LOOKBACK and, when above 0, the periods it counts
    have a declared width; else the WindowError naming the fix (raised when the DAG is parsed)."""
    if isinstance(lookback, bool) or not isinstance(lookback, int) or not 0 <= lookback <= MAX_LOOKBACK:
        raise WindowError(
            f"lookback={lookback!r} is not valid: give a whole number of earlier periods from 0 to "
            f"{MAX_LOOKBACK}, e.g. lookback=1 to rewrite yesterday with today; for more, run a backfill"
        )
    if lookback and parse_granularity(granularity) is None:
        raise WindowError(
            f"lookback={lookback} counts periods of the operator's granularity, and it declares none: "
            "declare it, e.g. granularity='day' (the width of each earlier period rewritten)"
        )
    return lookback


def covered_windows(
    window: Window, lookback: int, granularity: str | datetime.timedelta | None
) -> list[Window]:
    """The run's own window and the `lookback` periods of `granularity` before it, oldest first.

    The one rule for what a write with late data rewrites: the operators write and record these
    periods, the preview and the guard count them. The periods tile time up to the window's start
    (each ends where the next begins), in the window's zone; a window whose start is not on a
    period boundary of `granularity` is refused, since its earlier periods would overlap it.
    """
    lookback = check_lookback(lookback, granularity)
    if not lookback:
        return [window]
    unit = parse_granularity(granularity)
    assert unit is not None  # check_lookback refuses lookback without a granularity
    zone = resolve_zone(window.tz)
    if (
        not isinstance(unit, datetime.timedelta)
        and period_containing(window.start, unit, zone)[0] != window.start
    ):
        raise WindowError(
            f"window {window.label()} does not start on a {unit} boundary in {window.tz}, so the "
            f"{lookback} earlier {unit} period(s) lookback rewrites would overlap it: declare the "
            "granularity the window is made of (or a timetable whose intervals are whole periods)"
        )
    periods = [window]
    for _ in range(lookback):
        after = periods[0].start
        if isinstance(unit, datetime.timedelta):
            start = shift(after, -unit)
        else:
            start = period_containing(shift(after, -TICK), unit, zone)[0]
        periods.insert(0, Window(start, after, source="lookback", tz=window.tz))
    return periods


#: Partition key spellings a covered period's key is written in (the first that spells the run's own).
_KEY_FORMATS = ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H", "%Y-%m-%d %H:%M:%S")


def covered_partition_keys(key: str, periods: Sequence[Window]) -> list[str]:
    """The partition keys of the covered periods, spelt like the run's own `key` (the last period's),
    so a downstream partitioned DAG reruns every partition a write with lookback rewrote. A key
    whose spelling is not one of the known date forms stays the only one."""
    own = periods[-1].start.in_timezone(periods[-1].tz)
    for form in _KEY_FORMATS:
        if own.strftime(form) == key:
            return [p.start.in_timezone(p.tz).strftime(form) for p in periods]
    return [key]


def spanning(periods: Sequence[Window]) -> Window:
    """One window from the first period's start to the last one's end: what a write over the
    covered periods binds as :window_start / :window_end (periods from `covered_windows`)."""
    if len(periods) == 1:
        return periods[0]
    return Window(periods[0].start, periods[-1].end, source="lookback", tz=periods[-1].tz)


def window_from_context(
    context: Mapping[str, Any],
    granularity: str | datetime.timedelta | None = None,
    timezone: str = "UTC",
    anchor: Anchor = "start",
    *,
    quiet: bool = False,
) -> Window:
    """The run's window (see `_derive_window`); a date beyond the calendar is a WindowError.

    It logs how it derived the window (a task's log says which window it wrote) unless `quiet`:
    the guard and the UI derive hundreds at once, and a log line each cost more than the window."""
    try:
        return _derive_window(context, granularity, timezone, anchor, quiet)
    except (OverflowError, ValueError) as exc:
        if isinstance(exc, ValueError) and "out of range" not in str(exc):
            raise
        # datetime's calendar ends at years 1 and 9999, in UTC and in the window's zone alike
        raise WindowError(
            f"the run's window lies outside the calendar Python can represent (years 1 to 9999, in UTC "
            f"and in {timezone}): {exc}; pass a logical date, data interval or partition inside it"
        ) from exc


def run_window(
    run: Any,
    granularity: str | datetime.timedelta | None = None,
    timezone: str = "UTC",
    anchor: Anchor = "start",
) -> Window:
    """The window a run of `run` writes, by exactly the rule the operators apply to a task's context.

    `run` is anything carrying a run's identity: a `DagRunInfo` (what a timetable or a backfill plans),
    a `DagRun`, or a mapping. The guard, the UI and the harness call this, so "which window does this
    run write?" has one answer everywhere, whatever the operator's timezone and anchor. Quiet:
    its callers derive many windows at once (a task logs its own, `window_from_context`).
    """
    if isinstance(run, Mapping):
        return window_from_context(run, granularity, timezone, anchor, quiet=True)
    interval = getattr(run, "data_interval", None)
    context: dict[str, Any] = {
        "logical_date": getattr(run, "logical_date", None),
        "partition_key": getattr(run, "partition_key", None),
        "partition_date": getattr(run, "partition_date", None),
        "data_interval_start": getattr(interval, "start", getattr(run, "data_interval_start", None)),
        "data_interval_end": getattr(interval, "end", getattr(run, "data_interval_end", None)),
    }
    return window_from_context(context, granularity, timezone, anchor, quiet=True)


def to_utc(value: object, name: str = "instant") -> DateTime:
    """One instant in UTC from a datetime (naive means UTC, as Airflow stores them) or an ISO string.

    The one UTC normalisation of the package: history records, UI query values and the harness
    all go through it, so an instant never means two things.
    """
    return coerce_instant(value, name)


def to_utc_datetime(value: object, name: str = "instant") -> datetime.datetime:
    """`to_utc` as a plain stdlib datetime with tzinfo=datetime.timezone.utc (for SQLAlchemy, JSON)."""
    instant = coerce_instant(value, name)
    return datetime.datetime.fromtimestamp(instant.timestamp(), tz=datetime.timezone.utc)


def window_of(
    value: object,
    width: str | datetime.timedelta | None = None,
    timezone: str = "UTC",
    source: str = "given",
) -> Window:
    """A window a person names: a day ('2026-08-25', a date), an instant plus `width` (a granularity,
    default one day), or a (start, end) pair; dates are local midnights in `timezone`.

    For the CLI, the UI's query values and the idempotency harness, which take a window from a person
    rather than from a run.
    """
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise WindowError(f"window {value!r}: give (start, end), e.g. ('2026-08-01', '2026-09-01')")
        first, after = _named_instant(value[0], timezone), _named_instant(value[1], timezone)
        return Window(first, after, source, timezone)
    start = _named_instant(value, timezone)
    unit = parse_granularity(width) or "day"
    if isinstance(unit, datetime.timedelta):
        end = shift(start, unit)
    else:
        end = period_containing(start, unit, resolve_zone(timezone))[1]
    return Window(start, end, source, timezone)


def day_range(first: datetime.date, last: datetime.date, timezone: str = "UTC") -> Window:
    """The window of the whole days from `first` to `last`, both included (the CLI's --from/--to)."""
    if last < first:
        raise WindowError(f"--to {last.isoformat()} is before --from {first.isoformat()}: swap them")
    zone = resolve_zone(timezone)
    after = midnight(last + datetime.timedelta(days=1), zone)
    return Window(midnight(first, zone), after, "range", timezone)


def _named_instant(value: object, timezone: str) -> DateTime:
    """A date is the local midnight of `timezone`; a datetime or ISO string is as `coerce_instant`."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return midnight(value, resolve_zone(timezone)).in_timezone("UTC")
    if isinstance(value, str):
        parsed = parse_iso(value, timezone)
        if parsed is None:
            raise WindowError(
                f"window {value!r} is not an ISO 8601 date or datetime: give e.g. '2026-08-25' or "
                "'2026-08-25T10:00:00+00:00'"
            )
        return parsed
    if isinstance(value, datetime.datetime):
        return coerce_instant(value, "window")
    raise WindowError(
        f"window {value!r} is a {type(value).__name__}: give a date, a datetime, an ISO string or a "
        "(start, end) pair"
    )


def _derive_window(
    context: Mapping[str, Any],
    granularity: str | datetime.timedelta | None,
    timezone: str,
    anchor: Anchor,
    quiet: bool = False,
) -> Window:
    """Derive the run's window, first match wins:

    1. a partitioned run (``partition_key`` / ``partition_date``): the granularity period containing
       the partition (required granularity; a timedelta width starts at the partition instant);
    2. a data interval with width: exactly that interval;
    3. otherwise the logical date and the granularity: with anchor="start" the period containing the
       logical date; with anchor="end" the period ending at the floor of the logical date (use this with
       cron trigger timetables, whose run at 2026-08-26T00:00 should process 2026-08-25). A timedelta
       width is not floored: [ld, ld + width) or [ld - width, ld).

    Calendar periods are computed in `timezone`, so a day there can last 23 or 25 hours.
    """
    zone = resolve_zone(timezone)
    anchor = check_anchor(anchor)
    unit = parse_granularity(granularity)

    partition_key = context.get("partition_key")
    partition_date = context.get("partition_date")
    if partition_key is not None or partition_date is not None:
        if unit is None:
            raise WindowError(
                f"this is a partitioned run (partition_key={partition_key!r}) but the operator declares no "
                "granularity, so the partition's width is unknown: declare it on the operator, e.g. "
                f"granularity='day' for daily partitions (accepted: {_ACCEPTED})"
            )
        if partition_date is not None:
            instant = coerce_instant(partition_date, "partition_date")
        else:
            instant = _parse_partition_key(partition_key, timezone)
        start, end = _period(instant, unit, zone, "start")
        window = Window(start, end, source="partition_key", tz=timezone)
        if not quiet:
            log.info(
                "Window %s from the partition (key=%r, granularity=%s)", window.label(), partition_key, unit
            )
        return window

    raw_start = context.get("data_interval_start")
    raw_end = context.get("data_interval_end")
    interval_start = coerce_instant(raw_start, "data_interval_start") if raw_start is not None else None
    interval_end = coerce_instant(raw_end, "data_interval_end") if raw_end is not None else None
    if interval_start is not None and interval_end is not None:
        if interval_end < interval_start:
            raise WindowError(
                f"data_interval_end {interval_end.isoformat()} is before data_interval_start "
                f"{interval_start.isoformat()}: the run's data interval is reversed; fix the timetable that "
                "produced it (its data intervals must have end >= start)"
            )
        if interval_end > interval_start:
            window = Window(interval_start, interval_end, source="data_interval", tz=timezone)
            if not quiet:
                log.info("Window %s from the run's data interval", window.label())
            return window

    raw_logical = context.get("logical_date")
    if raw_logical is None:
        dag_id = _dag_id(context)
        raise WindowError(
            "this run has no logical date (a manual or asset-triggered run created without one) and no data "
            "interval, so there is no window to process: trigger it with a logical date, e.g. "
            f"`airflow dags trigger {dag_id} --logical-date 2026-08-25`, or set the logical date in the "
            "UI's trigger form"
        )
    logical = coerce_instant(raw_logical, "logical_date")
    if unit is None:
        if interval_start is not None and interval_start == interval_end:
            cause = (
                f"this run's data interval is empty (data_interval_start == data_interval_end == "
                f"{interval_start.isoformat()}), which is what Airflow 3's default cron timetable "
                "(CronTriggerTimetable, e.g. schedule='@daily') gives,"
            )
        else:
            cause = "this run has no data interval"
        raise WindowError(
            f"{cause} and the operator declares no granularity, so the window's width is unknown: declare "
            "it on the operator, e.g. granularity='day' (with anchor='end' to process the day that just "
            "ended), or schedule the DAG with a timetable that has a data interval (e.g. "
            "CronDataIntervalTimetable, or [scheduler] create_cron_data_intervals = True)"
        )
    start, end = _period(logical, unit, zone, anchor)
    window = Window(start, end, source="granularity", tz=timezone)
    if not quiet:
        log.info(
            "Window %s from the logical date %s (granularity=%s, anchor=%s)",
            window.label(),
            logical.isoformat(),
            unit,
            anchor,
        )
    return window


def _parse_partition_key(key: object, timezone: str) -> DateTime:
    """Read a time partition key (e.g. '2026-08-25', '2026-08-25T10') as local time in `timezone`."""
    parsed = parse_iso(str(key), timezone)
    if parsed is None:
        raise WindowError(
            f"partition_key {key!r} is not a date or datetime, so it cannot be turned into a time window: "
            "use ISO 8601 partition keys such as '2026-08-25' or '2026-08-25T10', or map the key to a date "
            "with a time-based partition mapper (e.g. StartOfDayMapper)"
        )
    return parsed


def _period(
    instant: DateTime,
    unit: ParsedGranularity,
    zone: Zone,
    anchor: Anchor,
) -> tuple[DateTime, DateTime]:
    """The period containing `instant` (anchor start) or the one ending at its floor (anchor end)."""
    if isinstance(unit, datetime.timedelta):
        if anchor == "start":
            return instant, shift(instant, unit)
        return shift(instant, -unit), instant
    start, end = period_containing(instant, unit, zone)
    if anchor == "end":
        # The instant just before the floor lies in the previous period, whatever its length.
        start, end = period_containing(shift(start, -TICK), unit, zone)
    return start, end


def _dag_id(context: Mapping[str, Any]) -> str:
    """Best effort, only to make the error's example command copy-pasteable."""
    for key in ("dag", "dag_run"):
        dag_id = getattr(context.get(key), "dag_id", None)
        if isinstance(dag_id, str) and dag_id:
            return dag_id
    return "<dag_id>"

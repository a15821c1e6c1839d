"""A backfill's scope: its windows, at most `cap` of them unless approved, and only closed ones.

The windows are the ones the DAG's tasks write (`GuardConfig.window`, i.e. `window.run_window`
with the guard's granularity, timezone and anchor), so the API server's middleware, the UI and
every task decide "has this window closed?" for the same window, by the same rule: `is_open`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_idempotent.guard.config import GuardConfig
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.intent import BackfillIntent
from airflow_idempotent.window import Window


@dataclass(frozen=True)
class InFlight:
    """The windows a DAG's still-active backfills rewrite (counted as `rewritten` counts), and which."""

    windows: int
    backfill_ids: tuple[int, ...]


def is_open(window: Window, now: datetime) -> bool:
    """Whether `window` has not closed at the wall clock `now` (its end is later).

    The one place the guard looks at the clock: deciding whether a window is over, never which
    window a run writes.
    """
    return window.end > now


def backfill_windows(config: GuardConfig, runs: Iterable[Any]) -> list[Window]:
    """The windows the runs of a backfill write (Airflow's DagRunInfo list), as its tasks read them."""
    return [config.window(run) for run in runs]


def rewritten(config: GuardConfig, runs: int) -> int:
    """The periods `runs` runs of a backfill rewrite: each its own window and the DAG's `lookback`
    earlier ones (overlaps counted each time, as each is a write recorded in history). What the
    cap and `approve_windows` count, at creation and in every task (`sizes.check_size`)."""
    return runs * (1 + config.lookback)


def check_scope(
    config: GuardConfig,
    intent: BackfillIntent | None,
    windows: Sequence[Window],
    now: datetime,
    in_flight: InFlight | None = None,
) -> None:
    """Bounded scope: at most `cap` windows unless approved by count, and only closed windows.

    `intent` None (a dry run without a conf, whose approval is unknown) checks only the closing.
    `now` is the wall clock of the request. `in_flight` is what the DAG's still-active backfills
    rewrite (read under the DAG's row lock, `guard.enforce`): they count toward the cap too, and
    an approval approves one backfill's own count only, never a second one beside it.
    """
    count = rewritten(config, len(windows))
    if count == 0:
        raise GuardRefusal("the backfill's range holds no window: check from_date and to_date.")
    if intent is not None and count > config.cap and intent.approve_windows != count:
        raise GuardRefusal(
            f"this backfill covers {count} windows{_runs(config, len(windows))}, over the DAG's cap of "
            f"{config.cap}: split it, or approve "
            f'exactly this count by adding "approve_windows": {count} to the conf.'
        )
    if in_flight is not None and in_flight.windows and count + in_flight.windows > config.cap:
        ids = ", ".join(str(i) for i in in_flight.backfill_ids)
        raise GuardRefusal(
            f"this backfill covers {count} windows and still-active backfill(s) {ids} of this DAG cover "
            f"{in_flight.windows}: {count + in_flight.windows} windows in flight, over the DAG's cap of "
            f"{config.cap}. Wait until they complete (or cancel them), then create this one."
        )
    open_windows = [window for window in windows if is_open(window, now)]
    if open_windows:
        first = min(window.end for window in open_windows)
        raise GuardRefusal(
            f"{len(open_windows)} window(s) of this backfill have not closed yet (the first ends "
            f"{first.isoformat()}): end the range at a window that is complete."
        )


def _runs(config: GuardConfig, runs: int) -> str:
    """How a count with lookback was made, for the refusal's text."""
    return f" ({runs} runs x (1 + lookback {config.lookback}))" if config.lookback else ""


def check_window_closed(window: Window, now: datetime | None = None) -> None:
    """A backfill never rewrites a window that has not ended yet (its source is still arriving):
    the check every guarded task runs again before it writes."""
    if is_open(window, now or datetime.now(timezone.utc)):
        raise GuardRefusal(
            f"window {window.label()} has not closed yet (it ends {window.end.isoformat()}): a backfill "
            "rewrites only complete windows; end the backfill's range earlier."
        )

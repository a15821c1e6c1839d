"""The guard's window of a run is the operator's window, whatever the timezone and anchor.

For each of {UTC, America/Los_Angeles, Asia/Kolkata} x {anchor start, end}, on a cron @daily DAG
(zero-width data intervals: the window is the logical date's day) and a data-interval timetable:
the windows the middleware computes from Airflow's own DagRunInfo list equal the windows the
operator writes for those runs (`window_from_context` of each run's context), and the guard and
the task agree that a window is open just before its end and closed at it. An operator that reads
its window otherwise than the guard is refused when it is built, and again before it writes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig, GuardRefusal, backfill_windows, check_window_closed
from airflow_idempotent.guard.backfills import evaluate_backfill_request, guard_of, serialized_dag
from airflow_idempotent.operators import PartitionOverwriteOperator
from airflow_idempotent.window import Window, window_from_context

ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata"]
ANCHORS = ["start", "end"]
TIMETABLES = ["cron", "data_interval"]
DECLARED = {"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}
TICK = dt.timedelta(microseconds=1)
DAYS = 3


def timetable(kind: str, zone: str) -> Any:
    from airflow.timetables.interval import CronDataIntervalTimetable
    from airflow.timetables.trigger import CronTriggerTimetable

    if kind == "cron":
        return CronTriggerTimetable("0 0 * * *", timezone=zone)  # what schedule="@daily" is
    return CronDataIntervalTimetable("0 0 * * *", timezone=zone)


def operator(dag: DAG | None, zone: str, anchor: str, **kwargs: Any) -> PartitionOverwriteOperator:
    return PartitionOverwriteOperator(
        task_id=kwargs.pop("task_id", "write"),
        dag=dag,
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        granularity=kwargs.pop("granularity", "day"),
        timezone=zone,
        anchor=anchor,  # type: ignore[arg-type]
        **kwargs,
    )


def guarded(kind: str, zone: str, anchor: str) -> tuple[DAG, PartitionOverwriteOperator]:
    guard = GuardConfig(cap=31, granularity="day", timezone=zone, anchor=anchor)  # type: ignore[arg-type]
    dag = DAG(
        f"guarded_{kind}",
        schedule=timetable(kind, zone),
        start_date=pendulum.datetime(2026, 7, 1, tz=zone),
        params={**guard.param(), "policy_version": "v1"},
    )
    return dag, operator(dag, zone, anchor)


def request(zone: str) -> dict[str, Any]:
    first = pendulum.datetime(2026, 8, 1, tz=zone)
    return {
        "dag_id": "guarded",
        "from_date": first.isoformat(),
        "to_date": first.add(days=DAYS - 1).isoformat(),
        "dag_run_conf": DECLARED,
    }


def run_context(info: Any) -> dict[str, Any]:
    """The context Airflow gives a task of the run it creates for `info` (what the task reads)."""
    interval = info.data_interval
    return {
        "logical_date": info.logical_date,
        "data_interval_start": interval.start if interval is not None else None,
        "data_interval_end": interval.end if interval is not None else None,
    }


@pytest.mark.parametrize("kind", TIMETABLES)
@pytest.mark.parametrize("anchor", ANCHORS)
@pytest.mark.parametrize("zone", ZONES)
def test_the_guards_window_of_a_run_is_the_operators(kind: str, zone: str, anchor: str) -> None:
    from airflow._shared.timezones import timezone
    from airflow.models.backfill import _get_info_list

    dag, task = guarded(kind, zone, anchor)
    served = serialized_dag(dag)  # what the API server has
    body = request(zone)
    infos = _get_info_list(
        from_date=timezone.coerce_datetime(pendulum.parse(body["from_date"])),
        to_date=timezone.coerce_datetime(pendulum.parse(body["to_date"])),
        reverse=False,
        dag=served,
    )
    assert len(infos) == DAYS
    config = guard_of(served)
    assert config is not None and (config.timezone, config.anchor) == (zone, anchor)

    guards = backfill_windows(config, infos)
    tasks = [window_from_context(run_context(info), "day", zone, anchor) for info in infos]  # type: ignore[arg-type]
    assert guards == tasks
    assert [task.window(run_context(info)) for info in infos] == tasks
    for window in tasks:  # a local day of the zone (23, 24 or 25 hours)
        assert window.tz == zone and window.is_date_aligned
        assert window.end_date() - window.start_date() == dt.timedelta(days=1)
    first_day = tasks[0].start_date()
    if kind == "cron" and anchor == "end":
        assert first_day == dt.date(2026, 7, 31)  # the day that ended at the first logical date
    else:
        assert first_day == dt.date(2026, 8, 1)

    last = tasks[-1]
    before, at = last.end - TICK, last.end
    message = evaluate_backfill_request(body, served, now=before)
    assert message is not None and "1 window(s) of this backfill have not closed yet" in str(message)
    assert f"the first ends {last.end.isoformat()}" in str(message)
    with pytest.raises(GuardRefusal, match="has not closed yet"):
        check_window_closed(last, before)
    assert evaluate_backfill_request(body, served, now=at) is None
    check_window_closed(last, at)  # closed: the task writes it


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (
            {"timezone": "Europe/Paris"},
            "timezone='Europe/Paris', but the DAG's backfill guard reads it with ",
        ),
        ({"anchor": "end"}, "anchor='end', but the DAG's backfill guard reads it with anchor='start'"),
        (
            {"granularity": "hour"},
            "granularity='hour', but the DAG's backfill guard reads it with granularity='day'",
        ),
    ],
)
def test_an_operator_reading_another_window_is_refused_when_built(
    declared: dict[str, Any], expected: str
) -> None:
    dag = DAG(
        "guarded", schedule="@daily", start_date=pendulum.datetime(2026, 8, 1), params=GuardConfig().param()
    )
    zone = declared.pop("timezone", "UTC")
    anchor = declared.pop("anchor", "start")
    with pytest.raises(GuardRefusal) as refused:
        operator(dag, zone, anchor, **declared)
    message = str(refused.value)
    assert message.startswith("task write reads its window with ") and expected in message
    assert "Declare the same on both: GuardConfig(..., " in message


def test_the_same_window_declared_differently_is_not_refused() -> None:
    guard = GuardConfig(granularity="daily", timezone="Asia/Kolkata", anchor="end")
    dag = DAG("guarded", schedule="@daily", start_date=pendulum.datetime(2026, 8, 1), params=guard.param())
    operator(dag, "Asia/Kolkata", "end", granularity="day")
    # without a granularity an operator writes only data-interval windows: the anchor is not read
    operator(dag, "Asia/Kolkata", "start", granularity=None, task_id="by_interval")


def test_an_operator_given_its_dag_later_is_refused_before_it_writes() -> None:
    dag = DAG(
        "guarded",
        schedule="@daily",
        start_date=pendulum.datetime(2026, 8, 1),
        params=GuardConfig(timezone="America/Los_Angeles").param(),
    )
    task = operator(None, "UTC", "start")
    task.dag = dag
    at = pendulum.datetime(2026, 8, 2, tz="UTC")
    context = {"logical_date": at, "data_interval_start": at, "data_interval_end": at}
    with pytest.raises(GuardRefusal, match="timezone='UTC', but the DAG's backfill guard reads it with "):
        task.execute(context)  # type: ignore[arg-type]  # refused before any connection is opened


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ({"timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"anchor": "middle"}, "anchor='middle' is not valid"),
        ({"granularity": "fortnight"}, "unknown granularity 'fortnight'"),
    ],
)
def test_the_guards_window_is_validated_by_the_windows_own_rules(
    declared: dict[str, Any], expected: str
) -> None:
    with pytest.raises(GuardRefusal, match=expected):
        GuardConfig(**declared)


def test_a_window_is_open_until_its_end() -> None:
    window = Window(pendulum.datetime(2026, 8, 1, tz="UTC"), pendulum.datetime(2026, 8, 2, tz="UTC"), "test")
    from airflow_idempotent.guard import is_open

    assert is_open(window, window.end - TICK) and not is_open(window, window.end)

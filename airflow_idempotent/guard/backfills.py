"""The guard's decision on an Airflow backfill request, by Airflow's own rules for what it creates.

A pure function of the request body, the DAG and the clock (`evaluate_backfill_request`), and
the same decision inside Airflow's API server (`airflow_decide`: the DAG from the metadata
database, the caller's permission, which windows Airflow will rerun). The API server's
middleware and the UI's backfill page call these.

The windows are the ones Airflow will create runs for: Airflow's own backfill info list
(`_get_info_list`: the DAG's timetable between from_date and to_date, closed data intervals only,
run_backwards), minus the windows Airflow skips under the request's reprocess_behavior (the same
query and rule Airflow's dry run uses), each read as the DAG's tasks read it (`GuardConfig.window`).
So the count in the message is the count the UI's dialog shows ("this backfill will trigger N
runs"), and `"approve_windows": N` approves exactly it.

What Airflow refuses on its own (unknown DAG, future-only range, from_date after to_date, a
non-periodic schedule, a conf that fails the DAG's params) is left to Airflow: None.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_idempotent.errors import WindowError
from airflow_idempotent.guard.config import GUARD_PARAM, GuardConfig
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.intent import BackfillIntent
from airflow_idempotent.guard.scope import InFlight, backfill_windows, check_scope

if TYPE_CHECKING:
    from airflow.models.backfill import ReprocessBehavior
    from airflow.timetables.base import DagRunInfo

#: A guarded backfill over more windows than this is refused without looking up each window's
#: existing run (one query each, as Airflow does): split it.
MAX_WINDOWS = 10_000

#: `will_run(info, reprocess_behavior)`: False for a window Airflow skips (its run exists).
WillRun = Callable[["DagRunInfo", "ReprocessBehavior"], bool]


class TooManyWindows(Exception):
    """A range holding more windows than a request may evaluate (`info_list`'s limit)."""


def info_list(
    dag: Any, from_date: datetime, to_date: datetime, reverse: bool, limit: int
) -> list[DagRunInfo]:
    """Airflow's backfill info list (`_get_info_list`: the timetable's runs in the range, closed
    data intervals only unless partitioned, reversed on request), read only up to `limit` windows:
    a longer range raises TooManyWindows without materialising it (1900..2026 daily is 46,000)."""
    from itertools import islice

    from airflow._shared.timezones import timezone

    now = timezone.utcnow()
    infos = dag.iter_dagrun_infos_between(from_date, to_date)
    if not dag.timetable.partitioned:
        infos = _closed(infos, now)
    found = list(islice(infos, limit + 1))
    if len(found) > limit:
        raise TooManyWindows(limit)
    return found[::-1] if reverse else found


def _closed(infos: Iterable[DagRunInfo], now: datetime) -> Iterator[DagRunInfo]:
    """Airflow's filter (a data interval that ended before `now`), stopping at the first open
    window: the timetable yields them in order, so none after it has closed (a range running to
    the year 9999 is not walked to its end)."""
    for info in infos:
        if not info.data_interval:
            continue
        if info.data_interval.end >= now:
            return
        yield info


def guard_of(dag: Any) -> GuardConfig | None:
    """The guard `dag` declares (its declared param default), None if unguarded.

    A DAG that has the param but an invalid value is guarded all the same: its backfills are
    refused with the reason (GuardRefusal) rather than let through unchecked.
    """
    params = getattr(dag, "params", None)
    if not params or GUARD_PARAM not in params:
        return None
    try:
        config = GuardConfig.of_params(params)
    except (GuardRefusal, TypeError, ValueError) as err:
        raise GuardRefusal(
            f"this DAG's {GUARD_PARAM} param is invalid ({err}): fix the DAG file; until then its "
            "backfills are refused."
        ) from None
    if config is None:
        raise GuardRefusal(
            f"this DAG's {GUARD_PARAM} param is not a guard declaration: declare it with "
            f"params={{**GuardConfig(cap=...).param()}}; until then its backfills are refused."
        )
    return config


def serialized_dag(dag: Any) -> Any:
    """Airflow's scheduler-side DAG (what the API server loads): `dag` itself, or its
    serialization when it is an authoring (task SDK) DAG, e.g. one built in a test."""
    if hasattr(dag, "iter_dagrun_infos_between"):
        return dag
    from airflow.serialization.serialized_objects import DagSerialization

    return DagSerialization.from_dict(DagSerialization.to_dict(dag))


def evaluate_backfill_request(
    body: Mapping[str, Any],
    dag: Any,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    will_run: WillRun | None = None,
    in_flight: InFlight | None = None,
    infos: Sequence[DagRunInfo] | None = None,
) -> GuardRefusal | None:
    """The guard's answer to a backfill request: a refusal saying what to fix, or None to let it through.

    `body` is the request's JSON (Airflow's BackfillPostBody), `dag` the DAG it names (serialized
    or authoring). `now` is the request's wall clock (default: now). `will_run` tells which of
    the range's windows Airflow will actually (re)run under the request's reprocess_behavior; by
    default all of them. `in_flight`: what the DAG's still-active backfills rewrite, counted
    toward the cap (read under the DAG's row lock where the backfill is created). `infos`: the
    range's windows (`info_list`) when the caller already read them. A None answer
    also means "Airflow refuses this request itself": the guard leaves Airflow's own validation
    and messages alone.

    A dry run without a DAG run conf (the UI's dialog sends none while the dates are edited) is
    checked only for open windows: the cap depends on the conf's approval, which the create
    request carries.
    """
    from airflow._shared.timezones import timezone
    from airflow.api_fastapi.core_api.datamodels.backfills import BackfillPostBody
    from airflow.exceptions import AirflowException
    from airflow.models.backfill import ReprocessBehavior, _validate_backfill_params
    from airflow.utils.types import DagRunType
    from pydantic import ValidationError

    try:
        config = guard_of(dag)
    except GuardRefusal as refusal:
        return refusal
    if config is None:
        return None
    try:
        request = BackfillPostBody.model_validate(dict(body))
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in err.errors()
        )
        return unevaluable(f"the request body is not a valid backfill request ({problems})")
    dag = serialized_dag(dag)
    from_date = timezone.coerce_datetime(request.from_date)
    to_date = timezone.coerce_datetime(request.to_date)
    behavior = ReprocessBehavior(request.reprocess_behavior)

    # What Airflow refuses on its own, it answers itself (same checks, same order as its route).
    if not dag.timetable.periodic:
        return None
    if dag.allowed_run_types is not None and DagRunType.BACKFILL_JOB not in dag.allowed_run_types:
        return None
    try:
        _validate_backfill_params(
            dag, request.run_backwards, from_date, to_date, behavior, request.dag_run_conf
        )
    except AirflowException:
        return None

    conf = request.dag_run_conf
    intent: BackfillIntent | None = None
    if not (dry_run and conf is None):
        try:
            intent = BackfillIntent.from_conf(conf, declared_params=set(dag.params))
            config.check_measures(intent.thresholds, "conf thresholds")
        except GuardRefusal as refusal:
            return refusal

    try:
        if infos is None:
            infos = info_list(dag, from_date, to_date, request.run_backwards, MAX_WINDOWS)
    except TooManyWindows:
        return GuardRefusal(
            f"this backfill covers more than {MAX_WINDOWS} windows, more than the guard evaluates in one "
            f"request and far over the DAG's cap of {config.cap}: split it into backfills of at "
            f"most {config.cap} windows."
        )
    except Exception as err:
        return unevaluable(f"the DAG's timetable failed ({type(err).__name__}: {err})")
    if not infos:
        return None  # Airflow answers "no runs to create" itself
    if will_run is not None:
        if isinstance(will_run, AirflowRuns):
            will_run.prepare(infos)  # one query for every window
        infos = [info for info in infos if will_run(info, behavior)]
        if not infos:
            return None  # every window already has its run: Airflow rewrites nothing
    try:
        windows = backfill_windows(config, infos)
    except WindowError as err:
        return unevaluable(str(err))
    try:
        check_scope(config, intent, windows, now or timezone.utcnow(), in_flight)
    except GuardRefusal as refusal:
        return refusal
    return None


def unevaluable(reason: str) -> GuardRefusal:
    """The refusal of a guarded request the guard cannot check: it fails closed, saying why."""
    return GuardRefusal(
        f"this DAG is guarded by airflow-idempotent and its backfill request could not be checked: "
        f"{reason}. Nothing was created."
    )


class AirflowRuns:
    """Airflow's own rule for which windows a backfill (re)runs, set-based: each window's latest
    run (the run Airflow's `_get_latest_dag_run_row_query` picks: same filters, same order) and
    the reprocess behavior (Airflow's `_get_dag_run_no_create_reason`).

    `prepare(infos)` reads the latest runs of all the windows in one query (the DAG's runs between
    the first and the last window), so a decision or a preview costs a constant number of queries,
    not one per window as Airflow's dry run does. Called as a `WillRun`; a window `prepare` did not
    see is looked up alone (Airflow's query).
    """

    def __init__(self, session: Any, dag_id: str) -> None:
        self.session = session
        self.dag_id = dag_id
        self.runs: dict[tuple[Any, Any], Any] = {}
        self.prepared: set[tuple[Any, Any]] = set()

    @staticmethod
    def key(info: DagRunInfo) -> tuple[Any, Any]:
        return info.logical_date, info.partition_date

    def prepare(self, infos: Sequence[DagRunInfo]) -> None:
        """Read the latest run of every window of `infos` in one query."""
        import sqlalchemy as sa
        from airflow.models import DagRun

        logical = [i.logical_date for i in infos if i.logical_date is not None]
        partition = [i.partition_date for i in infos if i.partition_date is not None]
        if not logical and not partition:
            return
        columns = (DagRun.run_id, DagRun.state, DagRun.start_date, DagRun.logical_date, DagRun.partition_date)
        stmt = sa.select(*columns).where(DagRun.dag_id == self.dag_id)
        if logical:
            stmt = stmt.where(DagRun.logical_date.between(min(logical), max(logical)))
        if partition:
            stmt = stmt.where(DagRun.partition_date.between(min(partition), max(partition)))
        # Airflow's order: runs that started, latest first, then those that never started.
        stmt = stmt.order_by(DagRun.start_date.is_(None), DagRun.start_date.desc())
        by_logical: dict[Any, list[Any]] = {}
        by_partition: dict[Any, list[Any]] = {}
        for row in self.session.execute(stmt).all():
            by_logical.setdefault(row.logical_date, []).append(row)
            by_partition.setdefault(row.partition_date, []).append(row)
        for info in infos:
            if info.logical_date is not None:
                found = by_logical.get(info.logical_date, [])
                if info.partition_date is not None:
                    found = [r for r in found if r.partition_date == info.partition_date]
            elif info.partition_date is not None:
                found = by_partition.get(info.partition_date, [])
            else:
                continue  # neither: left to Airflow's own query
            self.runs[self.key(info)] = found[0] if found else None
            self.prepared.add(self.key(info))

    def latest(self, info: DagRunInfo) -> Any:
        """The window's latest run (run_id, state, ...), None when it has none."""
        if self.key(info) not in self.prepared:
            from airflow.models.backfill import _get_latest_dag_run_row_query

            return self.session.scalar(_get_latest_dag_run_row_query(dag_id=self.dag_id, info=info))
        return self.runs[self.key(info)]

    def skip_reason(self, info: DagRunInfo, behavior: ReprocessBehavior) -> Any:
        """Why Airflow would not (re)run this window (its BackfillDagRunExceptionReason), or None."""
        from airflow.models.backfill import _get_dag_run_no_create_reason

        run = self.latest(info)
        return None if run is None else _get_dag_run_no_create_reason(run, behavior)

    def __call__(self, info: DagRunInfo, behavior: ReprocessBehavior) -> bool:
        return self.skip_reason(info, behavior) is None


def airflow_will_run(session: Any, dag_id: str) -> AirflowRuns:
    """Airflow's own rule for which windows a backfill (re)runs (`AirflowRuns`)."""
    return AirflowRuns(session, dag_id)


def airflow_decide(
    dag_id: str,
    body: Mapping[str, Any],
    dry_run: bool,
    now: datetime,
    scope: MutableMapping[str, Any],
    user: Any,
) -> GuardRefusal | None:
    """Load `dag_id` as Airflow's backfill route does, then decide; runs in a worker thread.

    `scope` is the request's ASGI scope and `user` the caller Airflow authenticated: a caller
    who may not create backfills of this DAG is left to Airflow's 403.
    """
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from fastapi import HTTPException
    from starlette.requests import Request

    with create_session(scoped=False) as session:
        serdag = session.scalar(SerializedDagModel.latest_item_select_object(dag_id))
        if serdag is None:
            return None  # Airflow answers 404
        dag = serdag.dag
        if GUARD_PARAM not in (dag.params or {}):
            return None
        try:  # the caller may create backfills of this DAG, or Airflow answers 403 itself
            requires_access_dag("POST", DagAccessEntity.RUN, dag_id)(Request(scope), user)
        except HTTPException:
            return None
        will_run = airflow_will_run(session, dag_id)
        return evaluate_backfill_request(body, dag, now=now, dry_run=dry_run, will_run=will_run)

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

from collections.abc import Callable, Mapping, MutableMapping
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
) -> GuardRefusal | None:
    """The guard's answer to a backfill request: a refusal saying what to fix, or None to let it through.

    `body` is the request's JSON (Airflow's BackfillPostBody), `dag` the DAG it names (serialized
    or authoring). `now` is the request's wall clock (default: now). `will_run` tells which of
    the range's windows Airflow will actually (re)run under the request's reprocess_behavior; by
    default all of them. `in_flight`: what the DAG's still-active backfills rewrite, counted
    toward the cap (read under the DAG's row lock where the backfill is created). A None answer
    also means "Airflow refuses this request itself": the guard leaves Airflow's own validation
    and messages alone.

    A dry run without a DAG run conf (the UI's dialog sends none while the dates are edited) is
    checked only for open windows: the cap depends on the conf's approval, which the create
    request carries.
    """
    from airflow._shared.timezones import timezone
    from airflow.api_fastapi.core_api.datamodels.backfills import BackfillPostBody
    from airflow.exceptions import AirflowException
    from airflow.models.backfill import ReprocessBehavior, _get_info_list, _validate_backfill_params
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
        infos = _get_info_list(from_date=from_date, to_date=to_date, reverse=request.run_backwards, dag=dag)
    except Exception as err:
        return unevaluable(f"the DAG's timetable failed ({type(err).__name__}: {err})")
    if not infos:
        return None  # Airflow answers "no runs to create" itself
    if len(infos) > MAX_WINDOWS:
        return GuardRefusal(
            f"this backfill covers {len(infos)} windows, more than the guard evaluates in one request "
            f"({MAX_WINDOWS}) and far over the DAG's cap of {config.cap}: split it into backfills of at "
            f"most {config.cap} windows."
        )
    if will_run is not None:
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


def airflow_will_run(session: Any, dag_id: str) -> WillRun:
    """Airflow's own rule for which windows a backfill (re)runs: its latest run for the window, if
    any, and the reprocess behavior (the query and rule its dry run and create use)."""
    from airflow.models.backfill import _get_dag_run_no_create_reason, _get_latest_dag_run_row_query

    def will_run(info: DagRunInfo, behavior: ReprocessBehavior) -> bool:
        run = session.scalar(_get_latest_dag_run_row_query(dag_id=dag_id, info=info))
        return run is None or _get_dag_run_no_create_reason(run, behavior) is None

    return will_run


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

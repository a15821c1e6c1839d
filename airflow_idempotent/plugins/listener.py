"""The run-history listener: every DAG run and every task attempt, recorded without ever getting in the way.

Airflow calls these hooks in three kinds of process, with different objects:

* the scheduler (and the mini-scheduler loop of `airflow dags test`): `on_dag_run_*` with the ORM
  `DagRun`, inside the scheduler's open session; and `on_task_instance_failed` with an ORM
  `TaskInstance` when the executor reports a task dead that never reported itself;
* the task process on a worker (and `airflow dags test`, which runs tasks in-process):
  `on_task_instance_*` with a `RuntimeTaskInstance`, where Airflow's ORM is off limits;
* the API server, when a user marks a task instance (`on_task_instance_*` with an ORM
  `TaskInstance` and `previous_state=None`) or a DAG run (`on_dag_run_success/failed`, with a
  "manually set" message) success or failed.

Rules every hook follows:

* It never raises into Airflow: each body is wrapped and a failure is logged at WARNING.
* It never blocks for long: the record goes to `SafeHistory` (bounded waits, spooled on failure)
  on a helper thread, and the hook gives up waiting after `HARD_LIMIT` seconds and spools the
  record itself. A record stored twice that way is stored once: the store inserts on natural keys.
  Once the store has failed, the process spools without waiting for `RETRY_AFTER` seconds, so a
  scheduler does not wait on a dead store for every DAG run; the next write after that delivers
  the spool.
* It never touches Airflow's ORM session: only attributes already loaded on an ORM object are
  read (through the instance's state dict), so nothing is lazily loaded, flushed or committed.

When a backfill's DAG run starts, the listener also records its backfill's size (the runs it
reruns and the conf's approval, counted in a session of its own): every guarded task of the run
checks it before writing, so a backfill created behind the guard writes nothing (`guard.sizes`).

One hook does more than record: when a backfill's DAG run ends (failed or success) while a kill
switch covers that DAG's backfill (a guard breach trips one, `airflow-idempotent stop` sets one),
the backfill is paused through Airflow, so the scheduler starts none of its queued runs (each of
which would refuse to write anyway). It does what Airflow's own pause route does (`is_paused`
set on a backfill that has not completed) in a short session of its own, never the caller's, on
the helper thread with the same bounded wait, and records `backfill_paused` with the switch's
reason in the run history.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

import pluggy
from airflow.sdk.plugins_manager import AirflowPlugin

from airflow_idempotent.guard.pause import pause_backfill
from airflow_idempotent.plugins.guard_middleware import BackfillGuardMiddleware
from airflow_idempotent.plugins.preload import preload_for_forks
from airflow_idempotent.plugins.ui.views import EXTERNAL_VIEWS
from airflow_idempotent.window import to_utc_datetime

if TYPE_CHECKING:
    from airflow_idempotent.history.spool import SafeHistory
    from airflow_idempotent.history.store import AttemptRecord, DagRunRecord, Record

log = logging.getLogger(__name__)

hookimpl = pluggy.HookimplMarker("airflow")

#: Seconds a hook waits for the store (SafeHistory's own bound is 2 s) before spooling itself.
HARD_LIMIT = 2.5
#: After the store failed, records go straight to the spool for this many seconds.
RETRY_AFTER = 30.0
#: Longest error text kept per attempt.
ERROR_CHARS = 2000
#: Prefix of the `msg` Airflow's API server passes when a user sets a DAG run's state.
MANUAL_DAG_RUN_MSG = "Dag Run's state was manually set"
#: The history event recording that the listener paused a backfill.
BACKFILL_PAUSED = "backfill_paused"


# --------------------------------------------------------------------------------------------
# One SafeHistory per process, created on first use; a forked child starts afresh.
# --------------------------------------------------------------------------------------------


class _ProcessState:
    def __init__(self) -> None:
        self.create_lock = threading.Lock()
        self.store_lock = threading.Lock()  # one store operation at a time per process
        self.history: SafeHistory | None = None
        self.store_down_until = 0.0  # time.monotonic() before which records go straight to the spool


_state = _ProcessState()


def _reset_after_fork() -> None:
    global _state
    _state = _ProcessState()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def history() -> SafeHistory:
    """This process's SafeHistory, created lazily."""
    state = _state
    if state.history is None:
        with state.create_lock:
            if state.history is None:
                from airflow_idempotent.history.spool import SafeHistory

                state.history = SafeHistory()
    return state.history


def submit(record: Record, limit: float = HARD_LIMIT) -> bool:
    """Hand `record` to the store, waiting at most `limit` seconds.

    True when SafeHistory took it in time (stored, or spooled by SafeHistory itself); False when
    it went straight to the spool: the store did not answer in time, or failed less than
    RETRY_AFTER seconds ago (a scheduler must not wait on a dead store for every DAG run).
    """
    safe = history()
    state = _state
    if time.monotonic() < state.store_down_until:
        safe.spool.append(record)
        return False

    def deliver() -> None:
        with state.store_lock:
            safe.record(record)  # delivers the spool first; spools on failure; never raises

    if _in_helper_thread(deliver, limit, f"recording {record.kind}"):
        # A successful write delivers the whole spool first: anything left in it means it failed.
        if safe.spool.pending():
            _store_down(state, "failed")
        return True
    # The store is hanging: keep the record safe in the spool and let the task go on. Should the
    # thread still store it later, the spooled copy is skipped on delivery (natural key).
    _store_down(state, f"did not answer within {limit:.1f} s")
    safe.spool.append(record)
    return False


def _in_helper_thread(work: Callable[[], None], limit: float, what: str) -> bool:
    """Run `work` on a daemon thread and wait for it at most `limit` seconds: True if it ended
    in time. Whatever it raises is logged there, never raised here."""
    done = threading.Event()

    def run() -> None:
        try:
            work()
        except Exception as err:
            log.warning("run history: %s failed: %s", what, err)
        finally:
            done.set()

    threading.Thread(target=run, name="idempotent-history", daemon=True).start()
    return done.wait(limit)


def _store_down(state: _ProcessState, why: str) -> None:
    state.store_down_until = time.monotonic() + RETRY_AFTER
    log.warning("run history: store %s; spooling records for %.0f s without waiting", why, RETRY_AFTER)


def _guard(hook: str, build: Callable[[], Record | None]) -> None:
    """Build and submit a record; never let anything escape into Airflow."""
    try:
        record = build()
        if record is not None:
            submit(record)
    except Exception as err:
        log.warning("run history: %s failed (%s: %s); nothing recorded", hook, type(err).__name__, err)


# --------------------------------------------------------------------------------------------
# Reading Airflow's objects safely.
# --------------------------------------------------------------------------------------------


def _loaded(obj: Any, *names: str) -> Any:
    """The first of `names` on `obj`, reading an ORM object only from its loaded state (no lazy
    load, no refresh of expired attributes, no autoflush). Plain objects use getattr."""
    if obj is None:
        return None
    from sqlalchemy import inspect as sa_inspect

    state = sa_inspect(obj, raiseerr=False)
    if state is None or not hasattr(state, "dict"):
        for name in names:
            value = getattr(obj, name, None)
            if value is not None:
                return value
        return None
    loaded = state.dict
    for name in names:
        if loaded.get(name) is not None:
            return loaded[name]
    return None


def _text(value: Any, limit: int | None = None) -> str | None:
    """A str for an enum or str value (anything else: None), cut to `limit` characters."""
    if isinstance(value, Enum):
        value = value.value
    if not isinstance(value, str):
        return None
    return value[:limit] if limit else value


def _instant(value: Any) -> datetime | None:
    """A loaded attribute as a plain aware UTC datetime (`window.to_utc_datetime`); None if not a datetime."""
    return to_utc_datetime(value, "timestamp") if isinstance(value, datetime) else None


def _identity(obj: Any, *names: str) -> list[str]:
    """The identifying attributes, which must be loaded: without them there is nothing to record."""
    values = [_loaded(obj, name) for name in names]
    missing = [name for name, value in zip(names, values, strict=True) if not isinstance(value, str)]
    if missing:
        raise ValueError(
            f"{type(obj).__name__} has no loaded {', '.join(missing)}: not read from the database"
        )
    return values


def _conf_text(conf: Any, key: str, model: Any) -> str | None:
    """conf[key] when conf is a mapping and the value a string, cut to the column's size."""
    if not isinstance(conf, Mapping):
        return None
    value = conf.get(key)
    from airflow_idempotent.history.models import column_length

    return value[: column_length(model, key)] if isinstance(value, str) else None


def _error_text(error: Any) -> str | None:
    if error is None:
        return None
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    else:
        text = str(error)
    return text[:ERROR_CHARS]


def is_orm_task_instance(task_instance: Any) -> bool:
    """True for airflow.models.taskinstance.TaskInstance (scheduler, API server), False for the
    task SDK's RuntimeTaskInstance. When the ORM module was never imported in this process (a
    worker), the object cannot be one of its instances: nothing is imported to find out."""
    module = sys.modules.get("airflow.models.taskinstance")
    if module is None:
        return False
    cls = getattr(module, "TaskInstance", None)
    return cls is not None and isinstance(task_instance, cls)


# --------------------------------------------------------------------------------------------
# Records.
# --------------------------------------------------------------------------------------------


def dag_run_record(dag_run: Any, event: str, msg: str | None) -> DagRunRecord:
    """A DagRunRecord from the ORM DagRun, reading only loaded attributes."""
    from airflow_idempotent.history.models import DagRunEvent, column_length
    from airflow_idempotent.history.store import DagRunRecord, utcnow

    when = _loaded(dag_run, "start_date") if event == "running" else _loaded(dag_run, "end_date")
    conf = _loaded(dag_run, "conf")
    manual = isinstance(msg, str) and msg.startswith(MANUAL_DAG_RUN_MSG)
    dag_id, run_id = _identity(dag_run, "dag_id", "run_id")
    return DagRunRecord(
        dag_id=dag_id,
        run_id=run_id,
        event=event,
        at=_instant(when) or utcnow(),
        state=_text(_loaded(dag_run, "_state", "state"), column_length(DagRunEvent, "state")) or event,
        run_type=_text(_loaded(dag_run, "run_type"), column_length(DagRunEvent, "run_type")),
        logical_date=_instant(_loaded(dag_run, "logical_date")),
        data_interval_start=_instant(_loaded(dag_run, "data_interval_start")),
        data_interval_end=_instant(_loaded(dag_run, "data_interval_end")),
        semantics=_conf_text(conf, "semantics", DagRunEvent),
        policy_version=_conf_text(conf, "policy_version", DagRunEvent),
        source="api_server" if manual else "scheduler",
        message=msg if isinstance(msg, str) else None,
    )


def _failure_event(task_instance: Any) -> str:
    """The event of a failure: up_for_retry when Airflow will retry it, else failed.

    The task runner sets the RuntimeTaskInstance's state to UP_FOR_RETRY or FAILED before it calls
    the listener (the scheduler does the same on the ORM object). Failing that, the server's
    retry decision for this try (`should_retry`), then try_number against max_tries.
    """
    state = _text(_loaded(task_instance, "state"))
    if state in ("up_for_retry", "failed"):
        return state
    context = getattr(task_instance, "_ti_context_from_server", None)
    should_retry = getattr(context, "should_retry", None)
    if isinstance(should_retry, bool):
        return "up_for_retry" if should_retry else "failed"
    try_number, max_tries = _loaded(task_instance, "try_number"), _loaded(task_instance, "max_tries")
    if isinstance(try_number, int) and isinstance(max_tries, int):
        return "up_for_retry" if try_number <= max_tries else "failed"
    return "failed"


def _map_index(value: Any) -> int:
    return value if isinstance(value, int) else -1


def _try_number(value: Any) -> int:
    return value if isinstance(value, int) else 0


def runtime_attempt_record(
    task_instance: Any, event: str, previous_state: Any, error: Any = None
) -> AttemptRecord:
    """An AttemptRecord from the task SDK's RuntimeTaskInstance (a worker, or `dags test`)."""
    from airflow_idempotent.history.models import TaskAttempt, column_length
    from airflow_idempotent.history.store import AttemptRecord, utcnow

    run_type = logical_date = None
    try:
        context = task_instance.get_template_context()
        dag_run = context.get("dag_run")
        run_type = getattr(dag_run, "run_type", None)
        logical_date = context.get("logical_date") or getattr(dag_run, "logical_date", None)
    except Exception as err:  # a record without run type beats no record
        log.debug("run history: no template context for %s: %s", task_instance, err)
    hostname = getattr(task_instance, "hostname", None) or socket.getfqdn()
    dag_id, run_id, task_id = _identity(task_instance, "dag_id", "run_id", "task_id")
    return AttemptRecord(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=_map_index(getattr(task_instance, "map_index", None)),
        try_number=_try_number(getattr(task_instance, "try_number", None)),
        event=event,
        at=utcnow(),
        state=_text(getattr(task_instance, "state", None), column_length(TaskAttempt, "state")) or event,
        previous_state=_text(previous_state, column_length(TaskAttempt, "previous_state")),
        run_type=_text(run_type, column_length(TaskAttempt, "run_type")),
        logical_date=_instant(logical_date),
        hostname=_text(hostname, column_length(TaskAttempt, "hostname")),
        source="worker",
        error=_error_text(error),
    )


def orm_attempt_record(
    task_instance: Any, event: str, previous_state: Any, error: Any = None
) -> AttemptRecord:
    """An AttemptRecord from an ORM TaskInstance, reading only loaded attributes.

    previous_state None: a user set the state through the API server ("marked_<state>").
    Otherwise the scheduler failed a task the executor reported dead ("failed"/"up_for_retry").
    """
    from airflow_idempotent.history.models import TaskAttempt, column_length
    from airflow_idempotent.history.store import AttemptRecord, utcnow

    marked = previous_state is None
    dag_run = _loaded(task_instance, "dag_run")
    dag_id, run_id, task_id = _identity(task_instance, "dag_id", "run_id", "task_id")
    return AttemptRecord(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=_map_index(_loaded(task_instance, "map_index")),
        try_number=_try_number(_loaded(task_instance, "try_number")),
        event=f"marked_{event}" if marked else event,
        at=utcnow(),
        state=_text(_loaded(task_instance, "state"), column_length(TaskAttempt, "state")),
        previous_state=_text(previous_state, column_length(TaskAttempt, "previous_state")),
        run_type=_text(_loaded(dag_run, "run_type"), column_length(TaskAttempt, "run_type")),
        logical_date=_instant(_loaded(dag_run, "logical_date")),
        hostname=_text(_loaded(task_instance, "hostname"), column_length(TaskAttempt, "hostname")),
        source="api_server" if marked else "scheduler",
        error=_error_text(error),
    )


def attempt_record(task_instance: Any, event: str, previous_state: Any, error: Any = None) -> AttemptRecord:
    if is_orm_task_instance(task_instance):
        return orm_attempt_record(task_instance, event, previous_state, error)
    return runtime_attempt_record(task_instance, event, previous_state, error)


# --------------------------------------------------------------------------------------------
# Pausing a backfill whose kill switch is on.
# --------------------------------------------------------------------------------------------


def backfill_of(dag_run: Any) -> int | None:
    """The id of the backfill a DAG run belongs to (loaded attributes only), or None."""
    if _text(_loaded(dag_run, "run_type")) != "backfill":
        return None
    backfill_id = _loaded(dag_run, "backfill_id")
    if isinstance(backfill_id, bool) or not isinstance(backfill_id, int):
        return None
    return backfill_id


def pause_if_switched(dag_run: Any, event: str, msg: str | None) -> None:
    """Pause the backfill of a DAG run that ended while a kill switch covers the DAG's backfill.

    Read in the hook (loaded attributes only); the store and Airflow's database are used on the
    helper thread, waited for at most HARD_LIMIT seconds. A store known to be down is not asked:
    the switches cannot be read, and the guarded tasks themselves refuse to write (fail closed).
    """
    backfill_id = backfill_of(dag_run)
    if backfill_id is None:
        return
    record = dag_run_record(dag_run, event, msg)
    state = _state
    if time.monotonic() < state.store_down_until:
        log.warning(
            "backfill guard: kill switches of %s not checked (history store down): backfill %s not "
            "paused; its guarded windows refuse to write while the store cannot be read",
            record.dag_id,
            backfill_id,
        )
        return
    safe = history()

    def work() -> None:
        from airflow_idempotent.guard import killswitch
        from airflow_idempotent.history.store import utcnow

        try:
            with state.store_lock:
                switches = killswitch.active_switches(safe.store, record.dag_id, backfill=True)
        except Exception as err:
            _store_down(state, f"failed ({type(err).__name__})")
            log.warning("backfill guard: kill switches of %s not readable: %s", record.dag_id, err)
            return
        if not switches:
            return
        reason = "; ".join(s.describe() for s in switches)
        if not pause_backfill(backfill_id):
            log.info("backfill guard: backfill %s already paused or completed (%s)", backfill_id, reason)
            return
        message = (
            f"backfill {backfill_id} of {record.dag_id} paused after {record.run_id} ended {event}: "
            f"{reason}. Once the cause is fixed: `airflow-idempotent resume --dag {record.dag_id} "
            f"--backfill`, then unpause the backfill (PUT /api/v2/backfills/{backfill_id}/unpause)."
        )
        log.warning("backfill guard: %s", message)
        paused = dataclasses.replace(record, event=BACKFILL_PAUSED, at=utcnow(), message=message)
        with state.store_lock:
            safe.record(paused)  # spooled if the store fails now; never raises

    if not _in_helper_thread(work, HARD_LIMIT, f"pausing backfill {backfill_id}"):
        log.warning(
            "backfill guard: pausing backfill %s of %s did not finish within %.1f s; it goes on in the "
            "background (the guarded windows refuse to write by themselves)",
            backfill_id,
            record.dag_id,
            HARD_LIMIT,
        )


def record_backfill_size(dag_run: Any) -> None:
    """Record how many windows a starting backfill run's backfill covers and approves, for its
    guarded tasks to check before they write (`guard.sizes`).

    Read in the hook (loaded attributes only); Airflow's BackfillDagRun rows are counted in a
    short session of its own and the record stored on the helper thread, waited for at most
    HARD_LIMIT seconds (then it goes on in the background; a task that finds no record refuses).
    """
    backfill_id = backfill_of(dag_run)
    if backfill_id is None:
        return
    dag_id, run_id = _identity(dag_run, "dag_id", "run_id")
    safe = history()
    state = _state

    def work() -> None:
        from airflow_idempotent.guard.sizes import measure
        from airflow_idempotent.history.store import BackfillSizeRecord, utcnow

        windows, approve = measure(backfill_id)
        record = BackfillSizeRecord(
            dag_id=dag_id,
            run_id=run_id,
            backfill_id=backfill_id,
            windows=windows,
            approve_windows=approve,
            recorded_at=utcnow(),
        )
        with state.store_lock:
            safe.record(record)  # spooled if the store fails now; never raises

    if not _in_helper_thread(work, HARD_LIMIT, f"recording the size of backfill {backfill_id}"):
        log.warning(
            "backfill guard: the size of backfill %s of %s was not recorded within %.1f s; it goes on "
            "in the background (a guarded task that finds no record refuses to write)",
            backfill_id,
            dag_id,
            HARD_LIMIT,
        )


def _size_guard(dag_run: Any) -> None:
    try:
        record_backfill_size(dag_run)
    except Exception as err:
        log.warning("backfill guard: backfill size not recorded (%s: %s)", type(err).__name__, err)


def _pause_guard(hook: str, dag_run: Any, event: str, msg: str | None) -> None:
    try:
        pause_if_switched(dag_run, event, msg)
    except Exception as err:
        log.warning(
            "backfill guard: %s could not check the kill switch (%s: %s)", hook, type(err).__name__, err
        )


# --------------------------------------------------------------------------------------------
# The hooks.
# --------------------------------------------------------------------------------------------


class HistoryListener:
    """Airflow listener (pluggy hook implementations) writing the run history."""

    # A scheduler or DAG processor starting: the operators imported once for the children it forks.
    @hookimpl
    def on_starting(self, component: Any) -> None:
        preload_for_forks(component)

    # DAG runs: scheduler (ORM DagRun, scheduler session: read only), API server for manual marks.
    @hookimpl
    def on_dag_run_running(self, dag_run: Any, msg: str) -> None:
        _guard("on_dag_run_running", lambda: dag_run_record(dag_run, "running", msg))
        _size_guard(dag_run)  # a backfill run: its backfill's size, which its guarded tasks check

    # A backfill run ending while a kill switch covers the DAG's backfill pauses that backfill.
    @hookimpl
    def on_dag_run_success(self, dag_run: Any, msg: str) -> None:
        _guard("on_dag_run_success", lambda: dag_run_record(dag_run, "success", msg))
        _pause_guard("on_dag_run_success", dag_run, "success", msg)

    @hookimpl
    def on_dag_run_failed(self, dag_run: Any, msg: str) -> None:
        _guard("on_dag_run_failed", lambda: dag_run_record(dag_run, "failed", msg))
        _pause_guard("on_dag_run_failed", dag_run, "failed", msg)

    # Task attempts: worker (RuntimeTaskInstance), API server / scheduler (ORM TaskInstance).
    @hookimpl
    def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
        _guard("on_task_instance_running", lambda: attempt_record(task_instance, "running", previous_state))

    @hookimpl
    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        _guard("on_task_instance_success", lambda: attempt_record(task_instance, "success", previous_state))

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        def build() -> AttemptRecord:
            marked = is_orm_task_instance(task_instance) and previous_state is None
            event = "failed" if marked else _failure_event(task_instance)
            return attempt_record(task_instance, event, previous_state, error)

        _guard("on_task_instance_failed", build)

    @hookimpl
    def on_task_instance_skipped(self, previous_state: Any, task_instance: Any) -> None:
        _guard("on_task_instance_skipped", lambda: attempt_record(task_instance, "skipped", previous_state))


history_listener = HistoryListener()


class _UIApps:
    """`IdempotentPlugin.fastapi_apps`, imported when read. Only Airflow's API server reads it;
    every task and the scheduler load the plugin for its listener, and importing the app (FastAPI,
    the routes, the effect ledger) took ~0.5 s of each of those processes."""

    def __get__(self, plugin: object, owner: type | None = None) -> list[dict[str, Any]]:
        from airflow_idempotent.plugins.ui.application import FASTAPI_APPS

        return FASTAPI_APPS


class IdempotentPlugin(AirflowPlugin):
    """Registers the run-history listener and, in the API server, the backfill guard middleware
    (entry point `airflow.plugins`: idempotent)."""

    name = "idempotent"
    listeners = [history_listener]  # noqa: RUF012 - AirflowPlugin's own attribute
    fastapi_root_middlewares = [  # noqa: RUF012 - AirflowPlugin's own attribute
        {"name": "idempotent_backfill_guard", "middleware": BackfillGuardMiddleware, "args": [], "kwargs": {}}
    ]
    # The UI pages and their JSON API (plugins/ui/): mounted at /idempotent, shown in Airflow's UI.
    fastapi_apps = _UIApps()  # type: ignore[assignment]
    external_views = EXTERNAL_VIEWS

"""Parse-time flag: a DAG whose catchup would schedule more windows than the backfill guard's cap.

`catchup=True` with a start_date far in the past is a backfill nobody asked for: "every interval
since start_date", by accident (Airflow 3 defaults catchup to False for this reason). The guard
caps deliberate backfills at `cap` windows (a guarded DAG's own, else 31); this cluster policy
applies the same cap to what catchup would schedule from start_date up to now.

It looks only at DAGs that use this provider: a task whose operator comes from this package, or
the backfill guard declared in the DAG's params (`uses_this_provider`). Catchup in other teams'
DAGs is Airflow's business, not this provider's: they are neither warned about nor refused.

It runs when the DAG processor bags each parsed DAG (Airflow's `dag_policy`, pluggy project
`airflow.policy`). Registration is the package's entry point::

    [project.entry-points."airflow.policy"]
    idempotent = "airflow_idempotent.plugins.catchup"

(or, without it, `from airflow_idempotent.plugins.catchup import dag_policy` in
`airflow_local_settings.py`). What it does is set by `[idempotent] unbounded_catchup`
(environment `AIRFLOW__IDEMPOTENT__UNBOUNDED_CATCHUP`), declared in the provider's configuration
(`get_provider_info()["config"]`, so `airflow config list` shows it):

* `warn` (default): log a WARNING naming the DAG, the count and the fix; the DAG loads;
* `refuse`: raise AirflowClusterPolicyViolation: the DAG does not load and the UI shows the
  message as its import error;
* `off`: do nothing.

It never breaks parsing by accident: anything that goes wrong while counting is logged at DEBUG
and the DAG loads as it is.

Being the module Airflow loads in every process (`airflow.settings.initialize()`: API server,
scheduler, DAG processor, CLI, workers), it also installs the backfill guard's one enforcement
point on import: a SQLAlchemy `before_flush` listener on every Session that hands a flush adding
an Airflow `Backfill` to `airflow_idempotent.guard.enforce` (which refuses it, rolling the
transaction back, when the guard refuses it). Every other flush costs a dict lookup.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow.policies import hookimpl
from sqlalchemy import event
from sqlalchemy.orm import Session

# Nothing of this package is imported at module level: Airflow loads this policy module while
# `import airflow` is still initialising, and our modules import airflow themselves.

if TYPE_CHECKING:
    from airflow.timetables.base import DagRunInfo

log = logging.getLogger(__name__)

MODES = ("warn", "refuse", "off")
CONFIG_SECTION = "idempotent"
CONFIG_KEY = "unbounded_catchup"
#: The modules whose operators make a DAG this provider's.
PACKAGE = "airflow_idempotent"


def uses_this_provider(dag: Any) -> bool:
    """True when a task of `dag` is an operator of this package or the DAG declares the guard."""
    from airflow_idempotent.guard.config import GUARD_PARAM

    if GUARD_PARAM in (getattr(dag, "params", None) or {}):
        return True
    for task in getattr(dag, "tasks", ()):
        module = type(task).__module__
        if module == PACKAGE or module.startswith(PACKAGE + "."):
            return True
    return False


def flag_unbounded_catchup(dag: Any, now: datetime | None = None) -> str | None:
    """The warning for `dag` when catchup would schedule more windows than its cap, else None.

    The cap is the DAG's guard cap (`idempotent_guard`), or DEFAULT_CAP for an unguarded DAG.
    Counts the runs the DAG's timetable schedules from start_date (to end_date) whose run_after
    has passed at `now` (default: now), as the scheduler would on first unpause, and stops at
    cap + 1: parsing stays cheap whatever the schedule.
    """
    if not getattr(dag, "catchup", False) or getattr(dag, "start_date", None) is None:
        return None
    from airflow._shared.timezones import timezone
    from airflow.serialization.encoders import coerce_to_core_timetable
    from airflow.timetables.base import TimeRestriction

    cap = _cap(dag)
    timetable = coerce_to_core_timetable(dag.timetable)
    if not getattr(timetable, "periodic", False):
        return None  # asset-triggered, @once, None: catchup creates no stream of windows
    now = timezone.coerce_datetime(now) if now is not None else timezone.utcnow()
    start = timezone.coerce_datetime(dag.start_date)
    end = timezone.coerce_datetime(dag.end_date) if getattr(dag, "end_date", None) else None
    restriction = TimeRestriction(earliest=start, latest=end, catchup=True)
    infos: list[DagRunInfo] = []
    while len(infos) <= cap:
        info = timetable.next_dagrun_info_v2(
            last_dagrun_info=infos[-1] if infos else None, restriction=restriction
        )
        if info is None or info.run_after > now:
            return None
        infos.append(info)
    first_at = infos[0].logical_date or infos[0].partition_date or infos[0].run_after
    from airflow_idempotent.guard.config import GUARD_PARAM

    guard = "the backfill guard's cap" if GUARD_PARAM in (dag.params or {}) else "the default guard cap"
    return (
        f"DAG {dag.dag_id!r} has catchup=True and would schedule more than {cap} windows from its "
        f"start_date ({first_at.isoformat()}) to now, over {guard} of {cap}: set catchup=False "
        f"(Airflow 3's default) and backfill deliberately in ranges of at most {cap} windows, or move "
        f"start_date to within {cap} windows of today."
    )


def _cap(dag: Any) -> int:
    from airflow_idempotent.guard.config import DEFAULT_CAP, GuardConfig

    try:
        config = GuardConfig.of_params(getattr(dag, "params", None))
    except Exception:  # an invalid guard declaration is reported where it is used
        config = None
    return config.cap if config is not None else DEFAULT_CAP


def mode() -> str:
    """`[idempotent] unbounded_catchup`: warn (default), refuse or off."""
    from airflow.configuration import conf

    value = str(conf.get(CONFIG_SECTION, CONFIG_KEY, fallback="warn")).strip().lower()
    if value not in MODES:
        log.warning("[%s] %s = %r is not one of %s: using 'warn'", CONFIG_SECTION, CONFIG_KEY, value, MODES)
        return "warn"
    return value


@hookimpl
def dag_policy(dag: Any) -> None:
    """Airflow cluster policy: flag (or, with `refuse`, reject) unbounded catchup at parse time, in
    DAGs that use this provider."""
    setting = mode()
    if setting == "off":
        return
    try:
        if not uses_this_provider(dag):
            return
        message = flag_unbounded_catchup(dag)
    except Exception as err:
        log.debug("unbounded-catchup check skipped for %s: %s", getattr(dag, "dag_id", dag), err)
        return
    if message is None:
        return
    if setting == "refuse":
        from airflow.exceptions import AirflowClusterPolicyViolation

        raise AirflowClusterPolicyViolation(message)
    log.warning("%s", message)


#: The module defining Airflow's Backfill model: until it is imported no backfill can be flushed.
BACKFILL_MODULE = "airflow.models.backfill"


def enforce_backfill_guard(session: Session, flush_context: Any, instances: Any) -> None:
    """SQLAlchemy `before_flush` on every Session: a flush adding a Backfill goes through the guard
    (`guard.enforce.check_new_backfills`, which raises its refusal); any other flush returns at once."""
    if BACKFILL_MODULE not in sys.modules or not session.new:
        return
    from airflow_idempotent.guard.enforce import check_new_backfills

    check_new_backfills(session, flush_context, instances)


def install_backfill_guard() -> None:
    """Register `enforce_backfill_guard` on every Session of this process (once)."""
    if not event.contains(Session, "before_flush", enforce_backfill_guard):
        event.listen(Session, "before_flush", enforce_backfill_guard)


install_backfill_guard()

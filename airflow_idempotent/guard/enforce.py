"""The one place the guard is enforced: wherever Airflow's ORM brings a backfill into existence.

Every way to create a backfill ends in Airflow's `_create_backfill` (the REST route, the UI's
backfill dialog, the plugin's own create, `airflow backfill create`, airflowctl, any client): it
adds a `Backfill` row and commits it before it creates a single DAG run. A SQLAlchemy
`before_flush` listener on every `Session` (`install`, called by the `airflow.policy` entry
point module that `airflow.settings.initialize()` loads in every Airflow process) evaluates the
guard for each new `Backfill` in that flush, in the same transaction, with the same decision as
the API server's middleware (`evaluate_backfill_request`, the windows Airflow will run). A
refusal raises `BackfillRefused`, which is both the guard's `GuardRefusal` and Airflow's own
`InvalidBackfillConf`: Airflow's REST route answers it with a 422 whose `detail` is the guard's
message, the CLI prints it, and the transaction rolls back, so no backfill row and no DAG run
exist afterwards.

Cheap for every other flush: it looks only at `session.new`, and recognises a `Backfill` without
importing Airflow's models (no instance can exist before `airflow.models.backfill` is imported).
If the guard cannot decide (the DAG cannot be read), it refuses: a guard that opens when it
breaks is not a guard.

Concurrent creations of one DAG's backfills are serialised by the DAG's row lock, taken in the
same transaction before the check (`lock_dag`), and the windows of every still-active backfill of
the DAG count toward the cap (`in_flight`): two requests racing past Airflow's own unlocked
"one active backfill per DAG" count cannot put more windows in flight than the cap.

Rows written with plain SQL (no ORM flush) are not seen here; the
guarded tasks' own check (`guard.sizes`) refuses to write for them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from airflow.models.backfill import InvalidBackfillConf

from airflow_idempotent.guard.backfills import (
    airflow_will_run,
    evaluate_backfill_request,
    guard_of,
    unevaluable,
)
from airflow_idempotent.guard.config import GUARD_PARAM, GuardConfig
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.scope import InFlight, rewritten

log = logging.getLogger(__name__)

BACKFILL_MODULE = "airflow.models.backfill"


class BackfillRefused(GuardRefusal, InvalidBackfillConf):
    """The guard's refusal of a backfill Airflow was about to create; Airflow answers it as its own
    invalid-conf error (the REST route's 422 `detail`, the CLI's message)."""


def new_backfills(objects: Iterable[Any]) -> list[Any]:
    """The `airflow.models.backfill.Backfill` instances among `objects` (a session's new objects).

    Nothing is imported: while Airflow's backfill module was never imported, none can exist.
    """
    module = sys.modules.get(BACKFILL_MODULE)
    cls = getattr(module, "Backfill", None) if module is not None else None
    if cls is None:
        return []
    return [obj for obj in objects if isinstance(obj, cls)]


def backfill_body(backfill: Any) -> dict[str, Any]:
    """The REST request body (BackfillPostBody) that creates `backfill`, so the guard evaluates every
    creation path exactly as the API server's middleware evaluates the REST request."""
    behavior = getattr(backfill.reprocess_behavior, "value", backfill.reprocess_behavior)
    return {
        "dag_id": backfill.dag_id,
        "from_date": backfill.from_date,
        "to_date": backfill.to_date,
        "run_backwards": False,  # the windows, not their order, decide
        "dag_run_conf": backfill.dag_run_conf,
        "reprocess_behavior": behavior or "none",
        "max_active_runs": backfill.max_active_runs or 10,
    }


def lock_dag(session: Any, dag_id: str) -> None:
    """Take the DAG's row lock (`SELECT ... FOR UPDATE` on Airflow's `dag` row) for the rest of
    `session`'s transaction: every creation of a backfill of this DAG waits here until the one
    before it committed its backfill row (Airflow commits it in the flush this check runs in), so
    each sees the others it must count. SQLAlchemy renders no FOR UPDATE on SQLite, whose single
    writer serialises the inserts instead."""
    from airflow.models.dag import DagModel

    session.execute(sa.select(DagModel.dag_id).where(DagModel.dag_id == dag_id).with_for_update())


def in_flight(session: Any, config: GuardConfig, dag: Any) -> InFlight:
    """What the DAG's still-active backfills (not completed) rewrite, by the cap's count (`rewritten`).

    A backfill's runs (its BackfillDagRun rows that have a DAG run) once Airflow created them;
    before that (it commits the backfill row first, then its runs), every window of its range,
    Airflow's own list: an upper bound, never an undercount.
    """
    from airflow._shared.timezones import timezone
    from airflow.models.backfill import Backfill, BackfillDagRun, _get_info_list

    active = session.execute(
        sa.select(Backfill.id, Backfill.from_date, Backfill.to_date)
        .where(Backfill.dag_id == dag.dag_id, Backfill.completed_at.is_(None))
        .order_by(Backfill.id)
    ).all()
    if not active:
        return InFlight(0, ())
    rows = dict(
        session.execute(
            sa.select(
                BackfillDagRun.backfill_id,
                sa.func.count(BackfillDagRun.dag_run_id),  # counts the non-NULL ones: runs
            )
            .where(BackfillDagRun.backfill_id.in_([b.id for b in active]))
            .group_by(BackfillDagRun.backfill_id)
        ).all()
    )
    runs = 0
    for backfill in active:
        if backfill.id in rows:
            runs += int(rows[backfill.id])
        else:  # its runs are not created yet: all of its range
            runs += len(
                _get_info_list(
                    from_date=timezone.coerce_datetime(backfill.from_date),
                    to_date=timezone.coerce_datetime(backfill.to_date),
                    reverse=False,
                    dag=dag,
                )
            )
    return InFlight(rewritten(config, runs), tuple(b.id for b in active))


def decide(session: Any, backfill: Any) -> GuardRefusal | None:
    """The guard's verdict on a backfill about to be inserted, read in `session`'s transaction
    under the DAG's row lock, counting the DAG's still-active backfills toward the cap."""
    from airflow.models.serialized_dag import SerializedDagModel

    with session.no_autoflush:
        serdag = session.scalar(SerializedDagModel.latest_item_select_object(backfill.dag_id))
        if serdag is None:
            return None  # Airflow refuses an unknown DAG itself
        dag = serdag.dag
        if GUARD_PARAM not in (dag.params or {}):
            return None
        config = guard_of(dag)
        if config is None:
            return None
        lock_dag(session, backfill.dag_id)
        flying = in_flight(session, config, dag)
        will_run = airflow_will_run(session, backfill.dag_id)
        return evaluate_backfill_request(backfill_body(backfill), dag, will_run=will_run, in_flight=flying)


def check_new_backfills(session: Any, flush_context: Any, instances: Any) -> None:
    """SQLAlchemy `before_flush`: refuse (raise BackfillRefused) a new backfill the guard refuses."""
    backfills = new_backfills(session.new)
    for backfill in backfills:
        try:
            refusal = decide(session, backfill)
        except GuardRefusal as err:
            refusal = err
        except Exception as err:
            log.warning("backfill guard: could not check a backfill of %s: %r", backfill.dag_id, err)
            refusal = unevaluable(f"the guard could not read the DAG ({type(err).__name__})")
        if refusal is not None:
            log.info("backfill guard refused a backfill of %s: %s", backfill.dag_id, refusal)
            raise BackfillRefused(str(refusal))


__all__ = [
    "BackfillRefused",
    "backfill_body",
    "check_new_backfills",
    "decide",
    "in_flight",
    "lock_dag",
    "new_backfills",
]

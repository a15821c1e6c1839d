"""Defence in depth: a guarded backfill's tasks check their backfill's size before they write.

The guard refuses an over-cap backfill where Airflow creates it (`guard.enforce`), but a backfill
row can still come into existence behind it (plain SQL, a process without this package). A
task's context does not say which backfill its run belongs to, nor how big it is, so the
scheduler's listener records it when a backfill run starts (`measure`: Airflow's BackfillDagRun
rows, read in a session of its own) and every guarded task of that run reads the record before
it writes (`check_size`). Over the cap without the exact approval, or no record at all (fail
closed), and the task refuses: such a backfill costs zero windows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_idempotent.guard.config import GuardConfig
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.scope import rewritten


def approval_of(conf: Any) -> int | None:
    """The conf's `approve_windows` when it is a whole number, else None."""
    value = conf.get("approve_windows") if isinstance(conf, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def measure(backfill_id: int) -> tuple[int, int | None]:
    """(windows, approve_windows) of Airflow backfill `backfill_id`: the runs it (re)runs (its
    BackfillDagRun rows that have a DAG run) and its conf's approval, read in a short session of
    its own (never the scheduler's). Raises LookupError for an unknown backfill."""
    import sqlalchemy as sa
    from airflow.models.backfill import Backfill, BackfillDagRun
    from airflow.utils.session import create_session

    with create_session(scoped=False) as session:
        conf = session.scalar(sa.select(Backfill.dag_run_conf).where(Backfill.id == backfill_id))
        if conf is None and session.scalar(sa.select(Backfill.id).where(Backfill.id == backfill_id)) is None:
            raise LookupError(f"backfill {backfill_id} does not exist")
        windows = session.scalar(
            sa.select(sa.func.count()).where(
                BackfillDagRun.backfill_id == backfill_id, BackfillDagRun.dag_run_id.is_not(None)
            )
        )
    return int(windows or 0), approval_of(conf)


def check_size(config: GuardConfig, size: Mapping[str, Any] | None, dag_id: str, run_id: str) -> None:
    """Refuse a guarded backfill run's write when its backfill is over the cap without the exact
    approval, or when no size was recorded for the run (fail closed); `size` is the history
    store's record (`HistoryStore.backfill_size`)."""
    if size is None:
        raise GuardRefusal(
            f"backfill run {run_id} of {dag_id} has no recorded backfill size, so the guard cannot tell "
            "whether its backfill was checked; nothing was written. The scheduler's listener records it "
            "when the run starts: install airflow-idempotent in the scheduler and keep the history store "
            "reachable, then clear this task."
        )
    windows, approve = rewritten(config, int(size["windows"])), size.get("approve_windows")
    if windows > config.cap and approve != windows:
        approved = "no approval" if approve is None else f'"approve_windows": {approve}'
        raise GuardRefusal(
            f"backfill {size['backfill_id']} of {dag_id} covers {windows} windows, over the DAG's cap of "
            f"{config.cap}, with {approved}: it was created without the guard's check, and no window of "
            f"it is written. Stop it and create it through Airflow with "
            f'"approve_windows": {windows} in the conf, or split it.'
        )

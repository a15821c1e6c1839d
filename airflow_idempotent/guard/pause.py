"""Pausing an Airflow backfill whose kill switch is on: the guard's one call into Airflow's backfill
row after creation (the listener calls it when a backfill run ends while a switch covers it)."""

from __future__ import annotations

from airflow_idempotent.adapters import adapter_class

#: Seconds pausing a backfill may wait for its row lock in Airflow's database.
PAUSE_LOCK_TIMEOUT = 2.0


def pause_backfill(backfill_id: int, lock_timeout: float = PAUSE_LOCK_TIMEOUT) -> bool:
    """Pause backfill `backfill_id` as Airflow's pause route does; True if this call paused it.

    A short session of its own (never the caller's, which is the scheduler's or a request's): one
    UPDATE of the backfill row, committed at once, waiting at most `lock_timeout` seconds for
    the row's lock (the database's adapter bounds the wait). A completed backfill is left alone
    (the route answers 409 for it), and one already paused is not touched again.
    """
    import sqlalchemy as sa
    from airflow.models.backfill import Backfill
    from airflow.utils.session import create_session

    with create_session(scoped=False) as session:
        database = adapter_class(session.get_bind().dialect.name)  # its class only: not our engine
        with database.bounded_lock_wait(session, lock_timeout):
            result = session.execute(
                sa.update(Backfill)
                .where(
                    Backfill.id == backfill_id,
                    Backfill.completed_at.is_(None),
                    sa.func.coalesce(Backfill.is_paused, sa.false()) == sa.false(),
                )
                .values(is_paused=True)
                .execution_options(synchronize_session=False)
            )
    return bool(getattr(result, "rowcount", 0))

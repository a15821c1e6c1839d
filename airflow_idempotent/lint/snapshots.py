"""A day's snapshot of current state filed under the run's date, deleted first (issue 35, round 36j).

Round 44's Grover raised 33 harmless IDEM001 findings; the largest shape (23) is one SQL file a
task runs: ``DELETE FROM t WHERE report_date = CURRENT_DATE;`` then ``INSERT INTO t SELECT
CURRENT_DATE AS report_date, .. FROM <the current file, table or state>`` (or a copy of a table the
task has just rebuilt into its history). The clock's day is the key of the rows, but what the
insert copies is the state at the moment it runs, not rows the clock picks: a same-day rerun
deletes the day's rows and writes them again, and the state of a day a run missed cannot be taken
later by any run. With catch-up off (or a DAG run only when triggered) no run is ever made for a
past day, so no run files today's state under a day it was meant for.

A DELETE whose clock reads are all the current day compared for equality with a column, followed
in the same SQL by an INSERT into the same table none of whose clock reads chooses rows (in WHERE,
JOIN or HAVING) or writes a time of day (``now()``), is such a snapshot: its clock reads (the
DELETE's key, the INSERT's written date) are information. Kept as findings: an INSERT whose rows the
clock chooses (``WHERE date(created_at) = CURRENT_DATE``: a late run after midnight files another
day's rows and the day itself is never loaded), a DELETE shifted by a span, a DELETE with no
reinsert of its table, and a DAG that catches up (each caught-up run would write today's state
under today, not the day it was made for).
"""

from __future__ import annotations

from airflow_idempotent.lint.definitions import DagDef
from airflow_idempotent.lint.facts import same_table
from airflow_idempotent.lint.rolling import catchup_off
from airflow_idempotent.lint.schedule import manual_only
from airflow_idempotent.lint.sqlfacts import REMOVING, SqlStatement

__all__ = ["daily_snapshots"]

_CLEARING = REMOVING | {"create"}


def _day_key(stmt: SqlStatement) -> str | None:
    """The table a DELETE clears the current day's rows of, by an equality of the day with a column."""
    if [w.how for w in stmt.writes] != ["delete"]:
        return None
    clocks = [r for r in stmt.reads if r.finding.kind == "clock"]
    if not clocks or len(clocks) != len(stmt.reads):
        return None
    if any(r.relative or not r.period or r.day_match is None for r in clocks):
        return None
    return stmt.writes[0].table


def _copies_state(stmt: SqlStatement, table: str) -> bool:
    """An INSERT into `table` whose rows no clock read chooses, and whose clock values are only
    written, as dates: a timestamp (``now()``) written where the DELETE matched the day may never
    equal it again (a timestamp column), so a same-day rerun would add rows (the corpus's c06)."""
    kept = [w for w in stmt.writes if w.how not in _CLEARING]
    if not kept or not all(w.how == "append" and same_table(w.table, table) for w in kept):
        return False
    return all(
        r.finding.kind == "clock" and r.period and not r.filtering and not r.relative for r in stmt.reads
    )


def daily_snapshots(statements: list[SqlStatement], dag: DagDef | None) -> dict[int, str]:
    """The statements (by index) whose clock reads are a day's snapshot key, with why (information)."""
    if dag is None:
        return {}
    why_off = "it runs only when triggered" if manual_only(dag) else catchup_off(dag)
    if why_off is None:
        return {}
    found: dict[int, str] = {}
    for i, stmt in enumerate(statements):
        table = _day_key(stmt)
        if table is None:
            continue
        reinsert = next(
            (j for j in range(i + 1, len(statements)) if _copies_state(statements[j], table)), None
        )
        if reinsert is None:
            continue
        why = (
            f"it is the key of a snapshot of current state: the task deletes the rows of {table} filed "
            "under today's date, then inserts the state as it is now (no clock read chooses the rows), so "
            f"a same-day rerun replaces them; the DAG runs with {why_off}, so no run is made for a past "
            "day, and the state of a day a run missed cannot be taken later"
        )
        found[i] = found[reinsert] = why
    return found

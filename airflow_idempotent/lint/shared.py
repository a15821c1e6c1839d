"""Tables several tasks write (IDEM007), and which tasks of a DAG clear a table before others load it.

Two writers of one table are a defect when one task's rerun changes rows the other wrote: an
overwrite and a patch, two appends, an overwrite and a merge. They are information (the rerun is
safe) when the pair is one of the shapes reviewers of public DAG repositories never acted on
(docs/lint-evaluation.md): a task that only clears the table and the loader after it in the same
DAG; writers that are all keyed (upserts, merges, inserts the key or engine deduplicates) or
prune what the keyed writer does not send (upsert-then-prune); writers that each replace only their
own slice (``DELETE .. WHERE`` of the slice in their DAG, then insert); writers that update or upsert
disjoint sets of columns; a scratch table that tasks of different DAGs each rebuild whole and another
task of the same DAG empties again (ilri's report DAGs: each Extract task deletes all of it and
inserts, the report reads it, a Flush task deletes it: no run leaves rows behind); writers that only
set literals (a shared helper's lock or flag table:
``UPDATE dag_run SET available = False`` at a DAG's start, ``= True`` at its end); a staged build,
where one task rebuilds the table whole (drops and recreates it, ``CREATE OR REPLACE``, ``CREATE
TABLE AS``, or deletes all of it and inserts in one task) and the others only update or delete its
rows in place (NYCPlanning's FacDB: ``create`` drops ``facilities``, 54 chained tasks refine it).

Round 5's principle, from the severity of every earlier round's labels (docs/lint-evaluation.md): a
pair is a defect only when one writer *replaces* rows of the table (overwrite, truncate, replace,
drop, create, any delete: its rerun removes what the other wrote), both writers only *add* rows
or amounts without a key (append, accumulate: each rerun adds again on top of the other's), or
both only set columns and one column is set by both (a rerun overwrites the other's value). Every
other pair (an append and updates of its rows, keyed upserts beside an append, updates of
different columns) re-applies only its own change on a rerun: information (`_redo_only_own`).

Round 8's principle, from the tuning labels (mitgate's granularity DAGs each appending their own
control records to ``control_load_data``, FredHutch's run ledgers): two writers that only *append*
rows never touch each other's rows. A rerun of either adds its own rows again, which is that
writer's own defect (IDEM002, reported on it), not the pair's: information. Amounts added to a
column (``SET x = x + ..``) stay a defect when both writers add to the table (each rerun adds on top
of the other's total: tenminschool's quiz and video DAGs).

Tables are scoped by connection and by the operator's ``database=`` / ``schema=`` (`transfers.task_conn`):
one table name in two databases is two tables.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from airflow_idempotent.lint.benign import AUDIT_COLUMN
from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.facts import TaskFacts, Write, same_table
from airflow_idempotent.lint.findings import Recorder

__all__ = ["DagClears", "check_shared_targets", "cleared_by", "dag_clears", "task_label"]

#: (dag id, table) -> the tasks of that DAG that only clear the table: (task id, clears a slice)
DagClears = dict[tuple[str | None, str], list[tuple[str, bool]]]

_CLEAR = frozenset({"delete", "truncate", "drop"})
_KEYED = frozenset({"upsert", "merge", "dedup", "keyed-insert", "fails-on-key"})
#: writes that change only the columns they set (an upsert inserts the rest as defaults)
_COLUMN_WRITES = frozenset({"upsert", "accumulate", "update"})
#: writes that build a table anew whatever it held: alone, or a whole-table clear plus an insert
_REBUILDS = frozenset({"drop", "replace", "create"})
_LOADS = frozenset({"append", "overwrite"})
#: writes that change rows of a table in place: the steps of a staged build after its rebuild (an
#: accumulating step, ``SET flag = flag || ..``, too: its own rerun is its IDEM008, round 18)
_IN_PLACE = frozenset({"update", "delete", "accumulate"})
#: writes whose rerun removes rows another task wrote (any delete: a window or key of it)
_REPLACES = frozenset({"overwrite", "truncate", "replace", "drop", "create", "delete"})
#: writes that add rows or amounts without a key: two such writers each add again on a rerun
_ADDS = frozenset({"append", "accumulate"})


def task_label(task: TaskDef) -> str:
    """``dag_id.task_id`` (or the task id of a task outside any DAG)."""
    return f"{task.dag_id}.{task.task_id}" if task.dag_id else task.task_id


def _hows(facts: TaskFacts, table: str) -> set[str]:
    return {w.how for w in facts.writes if w.table == table}


def dag_clears(tasks: Sequence[tuple[TaskDef, TaskFacts]]) -> DagClears:
    """The tasks that only delete, truncate or drop a table (nothing else of theirs writes it), by DAG."""
    out: DagClears = {}
    for task, facts in tasks:
        if task.dag_id is None:
            continue
        for table in {w.table for w in facts.writes if w.resolved}:
            clears = [w for w in facts.writes if w.table == table]
            if clears and all(w.how in _CLEAR and not _retention(w) for w in clears):
                sliced = all(_sliced(w) for w in clears)
                out.setdefault((task.dag_id, table), []).append((task.task_id, sliced))
    return out


def cleared_by(clears: DagClears | None, task: TaskDef, table: str, sliced: bool = False) -> str | None:
    """Another task of `task`'s DAG that clears `table` (only a slice of it, with `sliced`), if any.
    The names may differ by the parts one leaves out (`facts.same_table`: a stage table truncated as
    ``staging.stage_x`` and loaded as ``dw.staging.stage_x``, round 36k)."""
    for (dag_id, cleared), tasks in (clears or {}).items():
        if dag_id != task.dag_id or not same_table(cleared, table):
            continue
        for task_id, is_slice in tasks:
            if task_id != task.task_id and (is_slice or not sliced):
                return task_id
    return None


def _sliced(write: Write) -> bool:
    return write.how == "delete" and " WHERE " in f" {write.detail.upper()} "


#: ``DELETE .. WHERE created < '{{ ds }}'::date - INTERVAL '730 days'``: rows older than a span before
#: a point, one condition, no lower bound
_RETENTION = re.compile(
    r"\bWHERE\s+[\w.\"`]+\s*<=?\s*(?:(?!\b(?:AND|OR)\b)[^;])*?\s-\s*(?:INTERVAL\b|\d)", re.I
)


def _retention(write: Write) -> bool:
    """A prune of the rows older than a cutoff (smu-chile's ``delete_old_data``, round 22): it
    never clears the window a loader of the table appends, so that append stays a rerun problem."""
    return write.how == "delete" and _RETENTION.search(write.detail) is not None


def _rebuilds(facts: TaskFacts, table: str) -> bool:
    """The task builds `table` anew on every run: it drops (and recreates) it, creates or replaces it
    from a query, or truncates or deletes all of it and inserts in the same task."""
    hows = _hows(facts, table)
    if hows & _REBUILDS:
        return True
    mine = [w for w in facts.writes if w.table == table]
    clears_all = any(w.how == "truncate" or (w.how == "delete" and not _sliced(w)) for w in mine)
    return clears_all and bool(hows & _LOADS)


def rebuilders(tasks: Sequence[tuple[TaskDef, TaskFacts]]) -> dict[str, list[TaskDef]]:
    """The tasks that rebuild each table whole (`_rebuilds`), by table."""
    out: dict[str, list[TaskDef]] = {}
    for task, facts in tasks:
        for table in {w.table for w in facts.writes if w.resolved}:
            if _rebuilds(facts, table):
                out.setdefault(table, []).append(task)
    return out


def _staged(
    a: tuple[TaskDef, Write], b: tuple[TaskDef, Write], facts_of: dict[int, TaskFacts], built: list[TaskDef]
) -> TaskDef | None:
    """The task that rebuilds the table when `a` and `b` are steps of one staged build: the table is
    rebuilt whole by that task, and of the pair at most one is a rebuilder while the other only
    updates or deletes rows in place (two tasks that both rebuild it stay a conflict)."""
    (ta, wa), (tb, wb) = a, b
    conn = wa.conn_id or wb.conn_id
    builders = [t for t in built if conn is None or _conn_of(facts_of[id(t)], wa.table) in (None, conn)]
    if not builders:
        return None
    pair = (ta, tb)
    in_place = [_hows(facts_of[id(t)], wa.table) <= _IN_PLACE for t in pair]
    builds = [any(t is b for b in builders) for t in pair]
    if not any(in_place) or not all(p or b for p, b in zip(in_place, builds, strict=True)):
        return None
    return next((t for t, b in zip(pair, builds, strict=True) if b), builders[0])


def _conn_of(facts: TaskFacts, table: str) -> str | None:
    return next((w.conn_id for w in facts.writes if w.table == table and w.conn_id), None)


def _safe(task: TaskDef, table: str, facts: TaskFacts, clears: DagClears) -> bool:
    """A writer whose rerun touches only its own rows: keyed writes, a delete of a slice, or an
    append whose DAG deletes that slice first."""
    writes = [w for w in facts.writes if w.table == table]
    hows = {w.how for w in writes}
    if hows <= _KEYED | {"delete"} and all(_sliced(w) for w in writes if w.how == "delete"):
        return True
    return hows <= {"append"} and cleared_by(clears, task, table, sliced=True) is not None


def _benign(
    a: tuple[TaskDef, Write], b: tuple[TaskDef, Write], facts_of: dict[int, TaskFacts], clears: DagClears
) -> bool:
    """Whether two writers of one table leave each other's rows alone on a rerun."""
    (ta, wa), (tb, wb) = a, b
    ha, hb = _hows(facts_of[id(ta)], wa.table), _hows(facts_of[id(tb)], wb.table)
    if ta.dag_id == tb.dag_id and ta.dag_id is not None and (ha <= _CLEAR or hb <= _CLEAR):
        return True  # a task that only clears the table, and its loader
    if _disjoint_columns(facts_of[id(ta)], facts_of[id(tb)], wa.table):
        return True
    if _redo_only_own(facts_of[id(ta)], facts_of[id(tb)], wa.table):
        return True  # neither replaces rows, nor both add, nor both set one column: each redoes its own
    if (
        None not in (ta.dag_id, tb.dag_id)
        and ta.dag_id != tb.dag_id
        and _rebuilds(facts_of[id(ta)], wa.table)
        and _rebuilds(facts_of[id(tb)], wb.table)
        and cleared_by(clears, ta, wa.table) is not None
        and cleared_by(clears, tb, wb.table) is not None
    ):
        return True  # a scratch table each DAG rebuilds, reads and empties within its own run
    if _constant_only(facts_of[id(ta)], wa.table) and _constant_only(facts_of[id(tb)], wb.table):
        return True  # flags or a lock both set to literals: each rerun writes the same values again
    return _safe(ta, wa.table, facts_of[id(ta)], clears) and _safe(tb, wb.table, facts_of[id(tb)], clears)


def _constant_only(facts: TaskFacts, table: str) -> bool:
    """The task's writes of `table` are all UPDATEs that set literals only."""
    writes = [w for w in facts.writes if w.table == table]
    return bool(writes) and all(w.how == "update" and w.constant for w in writes)


def _disjoint_columns(a: TaskFacts, b: TaskFacts, table: str) -> bool:
    """Both tasks only update or upsert `table`, each setting columns the other never sets: neither
    rerun changes a value the other wrote (each writer's own rerun is judged on its own: IDEM008).
    Audit columns (``updated_at = now()``) both may set do not count."""
    sets: list[set[str]] = []
    for facts in (a, b):
        writes = [w for w in facts.writes if w.table == table]
        if not writes or any(w.how not in _COLUMN_WRITES or not w.sets for w in writes):
            return False
        sets.append({c for w in writes for c in w.sets if not AUDIT_COLUMN.search(c)})
    return not sets[0] & sets[1]


def _redo_only_own(a: TaskFacts, b: TaskFacts, table: str) -> bool:
    """Round 5's principle: neither task replaces rows of `table` (`_REPLACES`), they are not both
    keyless adders (`_ADDS`), and when both only set columns (updates, upserts) no column but audit
    ones is set by both (unknown columns count as shared): each rerun re-applies only its own change,
    and no value the other task wrote is overwritten (a task's rerun alone is enough: clearing one
    task is as common as rerunning a DAG, so one DAG's order does not settle a shared column)."""
    ha, hb = _hows(a, table), _hows(b, table)
    if (ha | hb) & _REPLACES or (ha <= _ADDS and hb <= _ADDS and "accumulate" in ha | hb):
        return False
    if not (ha <= _COLUMN_WRITES and hb <= _COLUMN_WRITES):
        return True
    sets: list[set[str]] = []
    for facts in (a, b):
        writes = [w for w in facts.writes if w.table == table]
        if any(not w.sets for w in writes):
            return False
        sets.append({c.lower() for w in writes for c in w.sets if not AUDIT_COLUMN.search(c)})
    return not sets[0] & sets[1]


#: writes that add rows to a table without deleting a slice of it first
_ADDS_ROWS = frozenset({"append", "upsert", "merge", "keyed-insert", "dedup"})


def _clears_whole(facts: TaskFacts, table: str) -> bool:
    """The task truncates, replaces or drops `table` whole, or deletes it with no WHERE."""
    return any(
        w.how in ("truncate", "replace", "drop") or (w.how == "delete" and not _sliced(w))
        for w in facts.writes
        if w.table == table
    )


def _overlap(
    task: TaskDef, table: str, conflicting: list[tuple[TaskDef, Write]], facts_of: dict[int, TaskFacts]
) -> str | None:
    """How `task`'s write of `table` and a conflicting writer's overlap on the same rows (round 36c, from
    every useful IDEM007 label of rounds 1-36), as the end of the finding's message; None when nothing
    shows they do (information).

    Principle: one task emptying the table whole while another's rows are not rebuilt by it (its
    rerun or clear alone drops them; from another DAG, on its own schedule); two DAGs both adding to
    values of the same rows; two DAGs deleting and reinserting the same slice (one SQL run by both);
    one DAG replacing a slice that another DAG adds rows to. Steps of one DAG, keyed writers, updates
    of a load's rows and each writer's own slice re-apply only their own part."""
    mine = facts_of[id(task)]
    for other, _ in conflicting:
        theirs = facts_of[id(other)]
        label = task_label(other)
        cross = None not in (task.dag_id, other.dag_id) and task.dag_id != other.dag_id
        if _clears_whole(mine, table) and not _rebuilds(theirs, table):
            return (
                f"this task empties {table} whole while {label}'s rows are not rebuilt by it: a rerun or "
                "clear of this task alone drops them"
            )
        if cross and _clears_whole(theirs, table) and not _rebuilds(mine, table):
            return f"{label}, in another DAG, empties {table} whole on its own schedule: this task's rows go"
        if not cross:
            continue
        hm, ho = _hows(mine, table), _hows(theirs, table)
        if "accumulate" in hm and "accumulate" in ho:
            return f"both add to values of the same rows from two DAGs: each rerun adds on top of {label}'s"
        my_slices = {w.detail for w in mine.writes if w.table == table and _sliced(w)}
        their_slices = {w.detail for w in theirs.writes if w.table == table and _sliced(w)}
        if my_slices & their_slices:
            return (
                f"both delete and reinsert the same slice from two DAGs: runs of each rewrite {label}'s rows"
            )
        # a window overwrite (PartitionOverwriteOperator, delete+insert of its window) replaces a slice too
        my_slices |= {w.detail for w in mine.writes if w.table == table and w.how == "overwrite"}
        their_slices |= {w.detail for w in theirs.writes if w.table == table and w.how == "overwrite"}
        if (my_slices and not their_slices and ho & _ADDS_ROWS) or (
            their_slices and not my_slices and hm & _ADDS_ROWS
        ):
            return (
                f"one of them deletes a slice of {table} that the other, in another DAG, adds rows to: the "
                "delete removes the other's rows of that slice"
            )
    return None


def check_shared_targets(
    tasks: Sequence[tuple[TaskDef, TaskFacts]], recorder: Recorder, clears: DagClears | None = None
) -> None:
    """IDEM007: one table written by more than one task (on the same connection, when both name one);
    information when every other writer is a benign partner (`_benign`).

    `tasks` are one repository's: tables of different repositories are never paired. A table whose
    name is only known at run time is no name, and is not paired either.
    """
    clears = dag_clears(tasks) if clears is None else clears
    built = rebuilders(tasks)
    writers: dict[str, list[tuple[TaskDef, Write]]] = {}
    facts_of = {id(task): facts for task, facts in tasks}
    for task, facts in tasks:
        seen: set[str] = set()
        for write in facts.writes:
            if write.how in ("create", "drop") or write.table in seen or not write.resolved:
                continue
            if write.table.startswith("<"):
                continue
            seen.add(write.table)
            writers.setdefault(write.table, []).append((task, write))
    for table, entries in writers.items():
        for task, write in entries:
            others = [
                (t, w)
                for t, w in entries
                if (t.dag_id, t.task_id) != (task.dag_id, task.task_id)  # the same task, spelled twice
                and (w.conn_id is None or write.conn_id is None or w.conn_id == write.conn_id)
            ]
            if not others:
                continue
            conflicting = [o for o in others if not _benign((task, write), o, facts_of, clears)]
            shown_others = conflicting or others
            names = ", ".join(f"{task_label(t)} ({t.scope.source.named}:{t.line})" for t, _ in shown_others)
            facts_of[id(task)].shared.append(
                f"{table} is also written by {', '.join(task_label(t) for t, _ in shown_others)}"
            )
            staged = [_staged((task, write), o, facts_of, built.get(table, [])) for o in conflicting]
            where = {"dag_id": task.dag_id, "task_id": task.task_id, "anchors": ((write.file, write.line),)}
            # round 36c: a defect only where the two writes overlap on the same rows
            harm = _overlap(task, table, conflicting, facts_of) if conflicting and not all(staged) else None
            if harm is not None:
                recorder.add(
                    "IDEM007",
                    task.scope.source.display,
                    task.line,
                    f"{table} is also written by {names}, and {harm}",
                    cause=table,
                    **where,
                )
                continue
            if conflicting and all(staged):
                builder = next(b for b in staged if b is not None)
                note = (
                    f"as steps of a staged build: {task_label(builder)} rebuilds {table} whole each run "
                    "and the other writers only update or delete its rows in place; rerunning the build "
                    "from its first step rebuilds the table (a step rerun alone applies that step to the "
                    "built table again)"
                )
            elif not conflicting:
                note = (
                    "each leaves the other's rows alone on a rerun (a clear and its loader, keyed "
                    "writers, each its own slice, flags set to literals, a scratch table each DAG rebuilds "
                    "whole, writers that only append their own rows, or writers that neither replace rows "
                    "nor both add amounts: runs of two DAGs at once still race, a scheduling matter)"
                )
            else:
                note = (
                    "nothing shows their writes overlap on the same rows (steps of one DAG in order, a "
                    "load and updates of its rows, each writer's own keys or slice): a rerun redoes this "
                    "task's own part. It would be a defect if one of them emptied the table whole while "
                    "the other's rows are not rebuilt by it, or two DAGs added to, or deleted and "
                    "reinserted, the same rows"
                )
            recorder.info(
                "IDEM007",
                task.scope.source.display,
                task.line,
                f"{table} is also written by {names}, but {note}",
                **where,
            )

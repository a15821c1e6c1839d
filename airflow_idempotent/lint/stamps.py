"""The clock's value written into a stamp column: information or a defect (issue 35, round 14).

A stamp column records when something was done to a row (`benign.AUDIT_COLUMN`: ``updated_at``;
`benign.LOAD_STAMP`: ``loaded_at``, ``created_at``, ``etl_date``). Written ``now()``, a rerun writes
another value, so the clock-SQL rule's condition holds. Whether a reviewer should act depends on two
facts the whole repository gives, so the decision waits for every task (`Linter.finish`):

- **who reads the stamp**: if any SQL of the repository compares the table's column by order or
  takes its MAX (``WHERE loaded_at > '{{ prev_ds }}'``, ``MAX(loaded_at)``), the stamp is a mark an
  increment selects by: a rerun re-stamps the rows and moves them into another increment (taken twice
  or missed). A defect, whatever the write;
- **how the rows are written**: otherwise, on rows the task writes by key or window (its window
  deleted and inserted in one task, an upsert, MERGE, UPDATE, a keyed or deduplicating insert), a
  rerun re-stamps the same rows and their data is the same: information. An audit column is
  information on any write (it says when a row was last touched); a load stamp on an append is
  left to the append's own finding (IDEM002) and still reported, as the rows it stamps are new.
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_idempotent.lint.benign import AUDIT_COLUMN
from airflow_idempotent.lint.facts import Stamp, Write
from airflow_idempotent.lint.findings import TaskCheck

__all__ = ["KEYED", "check_stamps", "marks_of"]

#: how a task writes rows it rewrites by key or window (`checks.task_findings` resolves appends first)
KEYED = frozenset(
    {"overwrite", "replace", "upsert", "merge", "update", "keyed-insert", "dedup", "fails-on-key"}
)


def marks_of(checks: Iterable[TaskCheck]) -> set[str]:
    """Every ``table.column`` the repository's SQL reads as a mark (``?.column``: table unknown)."""
    return {mark for check in checks for mark in check.facts.marks}


def _same(a: str, b: str) -> bool:
    """`a` names table `b` (one of them may leave out the schema)."""
    return a == b or (a.split(".")[-1] == b.split(".")[-1] and ("." not in a or "." not in b))


def _mark(stamp: Stamp, marks: set[str]) -> str | None:
    """The ``table.column`` of the stamp some SQL of the repository reads as a mark."""
    column = stamp.column.lower()
    for mark in sorted(marks):
        table, _, name = mark.rpartition(".")
        if name == column and (table == "?" or any(_same(table, t.lower()) for t in stamp.tables)):
            return f"{stamp.tables[0] if stamp.tables else table}.{name}" if table == "?" else mark
    return None


def _keyed(stamp: Stamp, writes: list[Write]) -> Write | None:
    tables = [t.lower() for t in stamp.tables]
    keyed = (w for w in writes if w.how in KEYED and any(_same(w.table.lower(), t) for t in tables))
    return next(keyed, None)


def check_stamps(check: TaskCheck, marks: set[str]) -> None:
    """Each clock value the task writes into a stamp column: IDEM001 or information (module doc)."""
    facts = check.facts
    for stamp in facts.stamps:
        mark = _mark(stamp, marks)
        keyed = _keyed(stamp, facts.writes)
        if mark is None and AUDIT_COLUMN.search(stamp.column):
            check.info(
                "IDEM001",
                stamp.file,
                stamp.line,
                f"{stamp.text} is written to {stamp.column}, an audit column (when the row was last "
                "touched): it changes no row a window holds and no value a report reads",
            )
            continue
        if mark is None and keyed is not None:
            check.info(
                "IDEM001",
                stamp.file,
                stamp.line,
                f"{stamp.text} is written to {stamp.column}, a stamp of when the row was written, on rows "
                f"the task writes by key or window ({keyed.detail}): a rerun re-stamps these rows; their "
                f"data is the same, and no SQL here selects by {stamp.column}",
            )
            continue
        facts.unstable.append(f"{stamp.text} (the clock)")
        check.recorder.picks_no_data.add((stamp.file, stamp.line))
        why = (
            f"and {mark} is read as a mark (compared by order or taken the MAX of): a rerun re-stamps "
            "the rows, so an increment that selects by it takes them again or misses them"
            if mark is not None
            else "so a rerun of a window gives different rows than its first run"
        )
        check.add(
            "IDEM001",
            stamp.file,
            stamp.line,
            f"the SQL reads the clock: {stamp.text}, written to {stamp.column}, {why}",
            cause="clock",
        )

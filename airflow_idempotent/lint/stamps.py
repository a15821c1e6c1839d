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
  left to the append's own finding (IDEM002) and still reported, as the rows it stamps are new;
- **a stamp on appended rows** (round 36c): information unless it is read as a mark, or its value is
  a date or period (``etl_date = CURRENT_DATE``) filed on rows the table keeps (`clockroles`);
- **rows exported to a file** (round 36b): a statement that writes no table and whose rows the task
  writes to a file (`exports.rows_file`, ``COPY (SELECT ..) TO 'f'``) makes the file whole each run:
  a rerun re-stamps the same rows, information, unless SQL anywhere in the repository selects by a
  column of that name (the rows' table is unknown there: `repomarks`, the `elsewhere` argument).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from airflow_idempotent.lint.benign import AUDIT_COLUMN
from airflow_idempotent.lint.facts import Stamp, Write
from airflow_idempotent.lint.findings import TaskCheck

__all__ = ["KEYED", "check_stamps", "exported_columns", "exported_tables", "marks_of"]

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


def exported_columns(checks: Iterable[TaskCheck]) -> set[str]:
    """The stamp columns (lower case) of rows the repository's tasks export to files."""
    return {s.column.lower() for c in checks for s in c.facts.stamps if s.exported and not s.tables}


#: how many tasks a file is followed through (a file read, transformed and exported again)
_HOPS = 6


def exported_tables(checks: list[TaskCheck]) -> dict[int, tuple[str, ...]]:
    """For each task whose SQL exports its rows to a file (by ``id()`` of its check): the tables the
    DAG's later tasks load that file into, found by the file's name or by a pull of the task's XCom
    naming a file (``key='parquet'``), followed through tasks that read it and export again."""
    readers: dict[tuple[str | None, str], list[TaskCheck]] = {}
    for c in checks:
        for name in c.facts.files_read:
            readers.setdefault((c.task.dag_id, name), []).append(c)
    out: dict[int, tuple[str, ...]] = {}
    for check in checks:
        if not any(s.exported for s in check.facts.stamps):
            continue
        tables: list[str] = []
        frontier, seen = [check], {id(check)}
        for _ in range(_HOPS):
            step: list[TaskCheck] = []
            for task in frontier:
                for name in [f"xcom:{task.task.task_id}", *task.facts.files_written]:
                    for reader in readers.get((task.task.dag_id, name), []):
                        if id(reader) in seen:
                            continue
                        seen.add(id(reader))
                        tables.extend(w.table for w in reader.facts.writes if w.how not in _REMOVES)
                        step.append(reader)
            frontier = step
        out[id(check)] = tuple(dict.fromkeys(tables))
    return out


_REMOVES = frozenset({"delete", "truncate", "drop"})


def _exported_mark(stamp: Stamp, marks: set[str], loaded: tuple[str, ...]) -> str | None:
    """The mark an exported stamp is read by: of the tables its file is loaded into, or of a column of
    that name whose table the reading SQL does not say (``?.column``). A mark of a named table into
    which no task loads the file selects other rows (round 36b: BASEL_CUST_DIM's stamp, read by the
    features, is another file's; its own export stays a finding)."""
    return _mark(replace(stamp, tables=loaded), marks)


def check_stamps(
    check: TaskCheck,
    marks: set[str],
    elsewhere: frozenset[str] = frozenset(),
    loaded: tuple[str, ...] = (),
) -> None:
    """Each clock value the task writes into a stamp column: IDEM001 or information (module doc).
    `elsewhere`: marks read by SQL of the repository outside its tasks (`repomarks`); `loaded`: the
    tables the task's exported file is loaded into (`exported_tables`)."""
    facts = check.facts
    for stamp in facts.stamps:
        mark = _mark(stamp, marks)
        keyed = _keyed(stamp, facts.writes)
        if stamp.exported and not stamp.tables:
            mark = _exported_mark(stamp, marks | elsewhere, loaded)
            if mark is None:
                into = f", loaded into {', '.join(loaded)}" if loaded else ""
                check.info(
                    "IDEM001",
                    stamp.file,
                    stamp.line,
                    f"{stamp.text} is written to {stamp.column}, a stamp of when the row was made, on "
                    f"rows the task exports to a file ({stamp.exported}{into}) that each run writes "
                    f"whole: a rerun re-stamps the same rows, and no SQL of the repository selects by "
                    f"{stamp.column}",
                )
                continue
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
        if mark is None and not stamp.files_rows:  # round 36c: a stamp on appended rows, no period
            check.info(
                "IDEM001",
                stamp.file,
                stamp.line,
                f"{stamp.text} is written to {stamp.column}, a stamp of when the row was written, and no "
                f"SQL here selects by {stamp.column}: a rerun's rows carry another time, and which rows "
                "they are is the write's own matter (an append is IDEM002). It would be a defect if the "
                "stamp were read as a mark, or were a date or period the rows are filed under",
            )
            continue
        facts.unstable.append(f"{stamp.text} (the clock)")
        check.recorder.picks_no_data.add((stamp.file, stamp.line))
        why = (
            f"and {mark} is read as a mark (compared by order or taken the MAX of): a rerun re-stamps "
            "the rows, so an increment that selects by it takes them again or misses them"
            if mark is not None
            else "a date the rows are filed under: a rerun of an earlier run files its rows under today"
        )
        check.add(
            "IDEM001",
            stamp.file,
            stamp.line,
            f"the SQL reads the clock: {stamp.text}, written to {stamp.column}, {why}",
            cause="clock",
        )

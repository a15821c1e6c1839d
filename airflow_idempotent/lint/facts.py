"""What the checks learn about one task, and what the three review questions are answered from.

The checks (`checks`, `sqlchecks`, `codechecks`) fill a `TaskFacts` per task; `answers` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_idempotent.lint.source import is_unresolved
from airflow_idempotent.lint.sqlfacts import TableKeys

__all__ = [
    "CONTEXT_FETCH",
    "RUN_NAMES",
    "SUBSCRIPT_TEXT",
    "Effect",
    "Stamp",
    "StateUse",
    "TaskFacts",
    "WindowRef",
    "Write",
    "same_table",
]

#: The window answer of a task whose code fetches the run's context (``get_current_context()``):
#: it may read the window from it, or only the DAG's id for a message (`catchups` tells them apart).
CONTEXT_FETCH = "The run's context: get_current_context() in its code."

#: How a task's window answer starts when its code subscripts a context name (``x["ds"]``): often a
#: row's field (``row["ts"]``), so round 36k's severities do not take it for the run's window.
SUBSCRIPT_TEXT = "The run's context: ["

#: Names of the run's context that carry its window.
RUN_NAMES = frozenset(
    {
        "ds",
        "ds_nodash",
        "ts",
        "ts_nodash",
        "ts_nodash_with_tz",
        "logical_date",
        "execution_date",
        "data_interval_start",
        "data_interval_end",
        "prev_ds",
        "next_ds",
        "window_start",
        "window_end",
        "window",
        "partition_key",
        "partition_date",
    }
)


def same_table(a: str, b: str) -> bool:
    """`a` and `b` name one table: equal, or the shorter one is the longer one's last parts
    (``dbo.t`` and ``db.dbo.t``: the database or schema left out is the connection's default).

    Two names that both spell a part and disagree on it (``a.dbo.t``, ``b.dbo.t``; ``s.t``, ``u.t``)
    are different tables: only parts one name leaves out are taken as agreeing (round 33, a
    SQLAlchemy connection's ``delete from WTProperty.dbo.t`` before ``insert into dbo.t``)."""
    if a == b:
        return True
    short, long = sorted((a.split("."), b.split(".")), key=len)
    return len(short) < len(long) and all(short) and long[len(long) - len(short) :] == short


@dataclass
class Write:
    """A table the task writes, how, and where (file, line) that write is written."""

    table: str
    how: str
    detail: str
    file: str
    line: int
    conn_id: str | None
    #: which of a mapped task's values made it (each ``.expand()`` item runs on its own)
    unit: int = 0
    #: an INSERT .. VALUES' columns: a declared key among them makes a rerun fail instead of append
    columns: tuple[str, ...] = ()
    #: the columns an UPDATE or an upsert's DO UPDATE sets (empty: unknown, or the whole row)
    sets: tuple[str, ...] = ()
    #: an UPDATE that sets only literals (a flag or lock: a rerun writes the same values)
    constant: bool = False
    #: a target named at run time (``to_sql(name=names[i])``): the name a string of the same
    #: expression renders to (``ecommdata.idem_py_names_i``), so the task's own ``TRUNCATE
    #: ecommdata.{names[i]}`` is seen to clear it
    stands_for: str = ""

    @property
    def resolved(self) -> bool:
        """The table's name is known: no part of it is computed at run time (a Python value, or a
        template such as ``{{ params.table }}`` that each task may render differently)."""
        return not is_unresolved(self.table) and "{{" not in self.table


@dataclass
class WindowRef:
    """Something that decides the task's window, and the answer's sentence for it."""

    kind: str  # run, param, clock, relative, target
    text: str
    #: False for a value that chooses no data (randomness makes ids): catch-up does not count it
    picks_data: bool = True


@dataclass
class Effect:
    """A side effect the task sends (an email, an HTTP POST...), and whether it carries a key."""

    what: str
    keyed: bool
    file: str
    line: int
    #: why sending it again is safe (`resubmit.replaces_interval`, `notices`: information), or None
    replaces: str | None = None
    #: known only from the operator's class name (``EmailSQLResultsOperator``), not from its code
    by_name: bool = False
    #: the URL or endpoint it is sent to, as text (`sendtargets`), when known
    target: str | None = None
    #: sent once per record (in a loop of its function), or to an address taken from the data
    per_record: bool = False


@dataclass(frozen=True)
class StateUse:
    """A task reading or saving state kept across runs (an Airflow Variable, asset state, an XCom
    of a task that reads a high-water mark): what, by which key, and where."""

    kind: str  # variable | asset | xcom
    key: str
    file: str
    line: int
    #: an XCom only added to a row number: a key offset, not where a window starts (`xcompulls`)
    numbers: bool = False


@dataclass(frozen=True)
class Stamp:
    """The clock's value written into a stamp column (`benign.AUDIT_COLUMN` / `LOAD_STAMP`) by a
    statement writing `tables`: `stamps` decides, once every task is known, if it is a defect."""

    column: str
    tables: tuple[str, ...]
    file: str
    line: int
    text: str  # the read as written: now(), CURRENT_TIMESTAMP
    #: the file the stamped rows go to when the statement writes no table (`exports.rows_file`)
    exported: str | None = None
    #: the value is a date or period written into rows a table keeps across runs (`clockroles`)
    files_rows: bool = False


@dataclass
class TaskFacts:
    """Everything the checks found about one task."""

    #: reads of the clock or randomness that change the values written (not which rows)
    unstable: list[str] = field(default_factory=list)
    #: what the linter cannot see into: "its bash command", "its Python code", "operator X"
    opaque: str | None = None
    #: "<table> is also written by <task>" for targets shared with other tasks
    shared: list[str] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    windows: list[WindowRef] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: state read (a watermark when some task saves it) and saved
    state_reads: list[StateUse] = field(default_factory=list)
    state_saves: list[StateUse] = field(default_factory=list)
    #: tables whose MAX(..) the task reads (a high-water mark it may hand on)
    max_of: list[str] = field(default_factory=list)
    #: tables whose not-yet-marked rows the task selects (``WHERE done_at IS NULL``): a queue
    pending: list[str] = field(default_factory=list)
    #: clock values written into stamp columns, and ``table.column`` its SQL reads as a mark
    stamps: list[Stamp] = field(default_factory=list)
    #: files the task's SQL writes its selected rows to, and files it reads (by name, or
    #: ``xcom:<task>`` for a path pulled from that task's XCom): `stamps.exported_tables` follows them
    files_written: list[str] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)
    #: clock values written only as a stamp field of a Python record or document (`docstamps`)
    document_stamps: list[Stamp] = field(default_factory=list)
    #: keys and generated columns of the tables the task's DDL declares
    declared: list[TableKeys] = field(default_factory=list)
    #: tables its SQL makes temporary (``CREATE TEMP TABLE``): they live for the session only
    temporary: set[str] = field(default_factory=set)
    saw_sql: bool = False
    saw_code: bool = False
    project: str | None = None  # "overwrite" | "merge"
    retries: int | None = None

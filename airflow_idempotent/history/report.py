"""The window history as the CLI (``airflow-idempotent history``) and the UI page show it.

Pure query and shaping logic over a :class:`HistoryStore`: no printing, no Airflow session.
:func:`window_history` returns plain dicts and lists (datetimes as timezone-aware UTC
``datetime`` objects; :func:`jsonable` turns them into ISO 8601 strings).

The filters choose *windows* (a target table and a window); each chosen window is then shown
whole, every write of it in order with its task attempts, so ordinals are never missing. Every
filter runs in SQL with bound values, in three small statements:

1. :func:`windows_query`: the matching windows, newest window first, at most ``limit``. With a
   DAG (and task) it reads ``ix_idem_window_write_dag``.
2. :func:`writes_query`: every write of those windows, joined on the window key, which reads
   ``ix_idem_window_write_target``.
3. :func:`attempts_query`: the attempts of the task instances that wrote those windows, through
   the attempt table's unique key (dag_id, run_id, task_id, map_index, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import Select

from airflow_idempotent.history.models import TaskAttempt, WindowWrite
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.window import day_range as whole_days
from airflow_idempotent.window import to_utc_datetime

#: Characters of a checksum or fingerprint shown in a table (JSON carries them whole).
SHORT = 12
#: Windows shown when no limit is given.
DEFAULT_LIMIT = 50

FLAG_NONDETERMINISTIC = "nondeterministic"
FLAG_SKIPPED = "skipped"
FLAG_REFUSED = "refused"
#: an older attempt stopped before commit because a newer try of its task instance wrote the window
FLAG_FENCED = "fenced"
FLAG_FAILED = "failed"
#: What `--flag` accepts: `failed` selects refused and fenced writes and failed task attempts.
FLAG_CHOICES = (FLAG_NONDETERMINISTIC, FLAG_SKIPPED, FLAG_FAILED)
#: Attempt states (or events) that mean the attempt failed.
FAILED_STATES = ("failed", "up_for_retry", "upstream_failed")

WRITE_FIELDS = (
    "ordinal",
    "written_at",
    "run_type",
    "dag_id",
    "run_id",
    "task_id",
    "map_index",
    "try_number",
    "strategy",
    "status",
    "rows_deleted",
    "rows_inserted",
    "rows_updated",
    "source_rows",
    "row_count",
    "checksum",
    "fingerprint",
    "dataset_version",
    "semantics",
    "policy_version",
    "message",
    "package_version",
    "dag_version_id",
    "dag_version_number",
    "bundle_name",
    "bundle_version",
)
ATTEMPT_FIELDS = (
    "dag_id",
    "run_id",
    "task_id",
    "map_index",
    "try_number",
    "event",
    "at",
    "state",
    "previous_state",
    "source",
    "hostname",
    "error",
)

_W = WindowWrite.__table__
_A = TaskAttempt.__table__


@dataclass(frozen=True)
class HistoryFilter:
    """Which windows to show. Every field is optional; ``None`` means "any"."""

    dag_id: str | None = None
    task_id: str | None = None
    #: the run_id of one DAG run
    run_id: str | None = None
    #: the table part of a target (``conn_id:table``), or the whole target
    table: str | None = None
    #: windows ending after this instant (inclusive start of the period asked for)
    start: datetime | None = None
    #: windows starting before this instant (exclusive end of the period asked for)
    end: datetime | None = None
    #: one of FLAG_CHOICES
    flag: str | None = None
    limit: int = DEFAULT_LIMIT
    #: only the writes (and their attempts and effects) of these DAGs, e.g. the DAGs a reader may
    #: see: it chooses the windows too, so no other DAG's write decides which windows are shown
    dag_ids: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.flag is not None and self.flag not in FLAG_CHOICES:
            raise ValueError(f"unknown flag {self.flag!r}: expected one of {', '.join(FLAG_CHOICES)}")
        if self.limit < 1:
            raise ValueError(f"limit must be at least 1, got {self.limit}")
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise ValueError(f"empty period: {self.start.isoformat()} is not before {self.end.isoformat()}")


def day_range(first: date | None, last: date | None) -> tuple[datetime | None, datetime | None]:
    """Whole UTC days ``first`` to ``last``, both included, as a half-open ``[start, end)``.

    The days are `window.day_range`'s; either end may be left open (``--from`` alone), which a
    history filter allows and a window does not.
    """
    start = to_utc_datetime(whole_days(first, first).start) if first else None
    end = to_utc_datetime(whole_days(last, last).end) if last else None
    return start, end


# ---------------------------------------------------------------------------------- queries
def _failed_attempt_exists(flt: HistoryFilter) -> sa.Exists:
    """A failed attempt of the same task instance (any try) as the write row.

    The DAG and task, when given, are repeated as constants: a planner that runs the subquery
    once (hashed) instead of per row can then read it through ix_idem_task_attempt_dag_task.
    """
    constants = [_A.c.dag_id == flt.dag_id] if flt.dag_id is not None else []
    if flt.task_id is not None:
        constants.append(_A.c.task_id == flt.task_id)
    return sa.exists().where(
        *constants,
        _A.c.dag_id == _W.c.dag_id,
        _A.c.run_id == _W.c.run_id,
        _A.c.task_id == _W.c.task_id,
        _A.c.map_index == _W.c.map_index,
        sa.or_(_A.c.state.in_(FAILED_STATES), _A.c.event.in_(FAILED_STATES)),
    )


def _scope_clauses(flt: HistoryFilter) -> list[sa.ColumnElement[bool]]:
    """The writes `flt.dag_ids` allows (every write when it is None)."""
    return [] if flt.dag_ids is None else [_W.c.dag_id.in_(sorted(flt.dag_ids))]


def target_matches(table: str) -> sa.ColumnElement[bool]:
    """A write's target is `table`: the whole target (``conn_id:table``) or its table part (LIKE
    wildcards in the name are literal)."""
    return sa.or_(_W.c.target == table, _W.c.target.endswith(":" + table, autoescape=True))


def _filter_clauses(flt: HistoryFilter) -> list[sa.ColumnElement[bool]]:
    clauses = _scope_clauses(flt)
    if flt.dag_id is not None:
        clauses.append(_W.c.dag_id == flt.dag_id)
    if flt.task_id is not None:
        clauses.append(_W.c.task_id == flt.task_id)
    if flt.run_id is not None:
        clauses.append(_W.c.run_id == flt.run_id)
    if flt.table is not None:
        clauses.append(target_matches(flt.table))
    if flt.start is not None:  # windows overlapping [start, end)
        clauses.append(_W.c.window_end > flt.start)
    if flt.end is not None:
        clauses.append(_W.c.window_start < flt.end)
    if flt.flag == FLAG_NONDETERMINISTIC:
        clauses.append(_W.c.nondeterministic == sa.true())
    elif flt.flag == FLAG_SKIPPED:
        clauses.append(_W.c.status == "skipped")
    elif flt.flag == FLAG_FAILED:
        clauses.append(sa.or_(_W.c.status.in_(("refused", "fenced")), _failed_attempt_exists(flt)))
    return clauses


def windows_query(flt: HistoryFilter) -> Select[Any]:
    """The (target, window_start, window_end) keys matching `flt`: newest windows, at most `limit`."""
    return (
        sa.select(_W.c.target, _W.c.window_start, _W.c.window_end)
        .where(*_filter_clauses(flt))
        .group_by(_W.c.target, _W.c.window_start, _W.c.window_end)
        .order_by(_W.c.window_start.desc(), _W.c.window_end.desc(), _W.c.target)
        .limit(flt.limit)
    )


def _on_window(win: Any) -> sa.ColumnElement[bool]:
    return sa.and_(
        _W.c.target == win.c.target,
        _W.c.window_start == win.c.window_start,
        _W.c.window_end == win.c.window_end,
    )


def writes_query(flt: HistoryFilter) -> Select[Any]:
    """Every write (of `flt.dag_ids`) of the windows of `flt`, by window, then in the order they happened."""
    win = windows_query(flt).subquery("win")
    return (
        sa.select(_W)
        .join(win, _on_window(win))
        .where(*_scope_clauses(flt))
        .order_by(_W.c.target, _W.c.window_start, _W.c.window_end, _W.c.written_at, _W.c.id)
    )


def attempts_query(flt: HistoryFilter) -> Select[Any]:
    """The attempts (every try) of each task instance (of `flt.dag_ids`) that wrote one of the windows of
    `flt`."""
    win = windows_query(flt).subquery("win")
    instances = (
        sa.select(
            _W.c.target,
            _W.c.window_start,
            _W.c.window_end,
            _W.c.dag_id,
            _W.c.run_id,
            _W.c.task_id,
            _W.c.map_index,
        )
        .join(win, _on_window(win))
        .where(*_scope_clauses(flt))
        .distinct()
        .subquery("ti")
    )
    return (
        sa.select(instances.c.target, instances.c.window_start, instances.c.window_end, *_A.c)
        .join(
            _A,
            sa.and_(
                _A.c.dag_id == instances.c.dag_id,
                _A.c.run_id == instances.c.run_id,
                _A.c.task_id == instances.c.task_id,
                _A.c.map_index == instances.c.map_index,
            ),
        )
        .order_by(_A.c.at, _A.c.id)
    )


# ---------------------------------------------------------------------------------- shaping
def _plain(row: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The named fields of a row; its timestamps are aware UTC already (the store's UTCDateTime)."""
    return {name: row[name] for name in names}


def split_target(target: str) -> tuple[str | None, str]:
    """``"conn_id:table"`` -> ``("conn_id", "table")``; a target without a colon has no conn_id."""
    conn_id, sep, table = target.partition(":")
    return (conn_id, table) if sep else (None, target)


def attempt_failed(attempt: Mapping[str, Any]) -> bool:
    return attempt.get("state") in FAILED_STATES or attempt.get("event") in FAILED_STATES


def first_line(text: str | None) -> str | None:
    """The first non-empty line of a message (an error's traceback is in the JSON)."""
    if not text:
        return text
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def short(value: str | None, length: int = SHORT) -> str | None:
    return value[:length] if value else value


def _write_flags(write: Mapping[str, Any], failed_tries: set[tuple[Any, ...]]) -> list[str]:
    flags = []
    if write["nondeterministic"]:
        flags.append(FLAG_NONDETERMINISTIC)
    if write["status"] == "skipped":
        flags.append(FLAG_SKIPPED)
    if write["status"] == "refused":
        flags.append(FLAG_REFUSED)
    if write["status"] == "fenced":
        flags.append(FLAG_FENCED)
    key = (write["dag_id"], write["run_id"], write["task_id"], write["map_index"], write["try_number"])
    if key in failed_tries:
        flags.append(FLAG_FAILED)
    return flags


def shape(writes: Iterable[Mapping[str, Any]], attempts: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of :func:`writes_query` and :func:`attempts_query` -> one dict per window.

    Each window: ``target``, ``conn_id``, ``table``, ``window`` (``start``, ``end``, ``label``),
    ``flags`` (union of its writes' flags, plus ``failed`` for a failed attempt), ``writes``
    (each with ``flags``: nondeterministic / skipped / refused / failed, the last when that
    write's own try failed) and ``attempts`` (each with ``failed``).
    """
    windows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in writes:
        key = (row["target"], row["window_start"], row["window_end"])
        window = windows.get(key)
        if window is None:
            conn_id, table = split_target(row["target"])
            window = windows[key] = {
                "target": row["target"],
                "conn_id": conn_id,
                "table": table,
                "window": {"start": key[1], "end": key[2], "label": row["window_label"]},
                "flags": [],
                "writes": [],
                "attempts": [],
            }
        write = _plain(row, WRITE_FIELDS)
        write["nondeterministic"] = bool(row["nondeterministic"])
        window["writes"].append(write)
        window["window"]["label"] = row["window_label"]  # the latest write's label

    for row in attempts:
        key = (row["target"], row["window_start"], row["window_end"])
        if key in windows:
            attempt = _plain(row, ATTEMPT_FIELDS)
            attempt["failed"] = attempt_failed(attempt)
            windows[key]["attempts"].append(attempt)

    for window in windows.values():
        failed_tries = {
            (a["dag_id"], a["run_id"], a["task_id"], a["map_index"], a["try_number"])
            for a in window["attempts"]
            if a["failed"]
        }
        seen: list[str] = []
        for write in window["writes"]:
            write["flags"] = _write_flags(write, failed_tries)
            seen.extend(write["flags"])
        if failed_tries:
            seen.append(FLAG_FAILED)
        window["flags"] = [flag for flag in (*FLAG_CHOICES, FLAG_REFUSED, FLAG_FENCED) if flag in seen]
    return list(windows.values())


# ---------------------------------------------------------------------------------- reading
def store_is_empty(store: HistoryStore) -> bool:
    """True when nothing was ever recorded: no embedded file yet, or no history tables.

    Checked without creating anything, so a read never leaves a database file behind.
    """
    url = store.engine.url
    file = url.database if url.get_backend_name() == "sqlite" and url.database != ":memory:" else None
    if file and not Path(file).exists():
        return True
    with store.engine.connect() as conn:
        return not sa.inspect(conn).has_table(WindowWrite.__tablename__)


def window_history(store: HistoryStore, flt: HistoryFilter | None = None) -> list[dict[str, Any]]:
    """The windows matching `flt`, each with every write in order and its task attempts.

    Ordered by target, then window start. Raises SQLAlchemy's errors when the store cannot be
    reached.
    """
    flt = flt or HistoryFilter()
    if (flt.dag_ids is not None and not flt.dag_ids) or store_is_empty(store):
        return []
    store.migrate()
    with store.engine.connect() as conn:
        writes = [dict(r._mapping) for r in conn.execute(writes_query(flt))]
        if not writes:
            return []
        attempts = [dict(r._mapping) for r in conn.execute(attempts_query(flt))]
    windows = shape(writes, attempts)
    from airflow_idempotent.history.dag_versions import fill_versions

    fill_versions(w for window in windows for w in window["writes"])
    from airflow_idempotent.effects.ledger import effects_for_windows

    by_window = effects_for_windows(
        store.engine,
        [(w["window"]["start"], w["window"]["end"]) for w in windows],
        dag_ids=[flt.dag_id] if flt.dag_id else (sorted(flt.dag_ids) if flt.dag_ids is not None else None),
    )
    from airflow_idempotent.history.approvals import for_windows

    decided = for_windows(store, [w["target"] for w in windows], flt.dag_ids, flt.dag_id)
    for w in windows:
        w["effects"] = by_window.get((w["window"]["start"], w["window"]["end"]), [])
        w["approvals"] = decided.get((w["target"], w["window"]["start"], w["window"]["end"]), [])
    return windows


def jsonable(value: Any) -> Any:
    """Datetimes to ISO 8601, recursively through dicts, lists and tuples."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value

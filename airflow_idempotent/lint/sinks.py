"""Where a clock value goes in Python code, and whether a rerun then reads or writes other data
(IDEM003's severity, issue 35 round lint46; evidence in docs/lint-evaluation.md).

Principle: a plain clock read (not shifted by a span, not a ``start_date``) is a finding only when its
value reaches what the task reads or writes: a comparison or branch that selects data, a name or
argument that is a date, period, path, key or mark (``target_date``, ``since``, ``prefix``, ``folder``,
``snapshot_id``), a call that sends or reads data (``execute``, ``get``, ``post``, ``Variable.set``,
``xcom_push``), or a value the DAG file hands to its tasks. Where every use only stamps (``*_at``,
``updated``, ``timestamp``), logs, times or titles, the rerun reads and writes the same data with a
later stamp: information. Decided in `findings.Recorder.clock_read`, where a plain clock read's
IDEM003 is made. ``generated_at`` counts as data, not a stamp: round 5's adapstory plans key their
operation ids and paths by it. Across the labelled rounds 11-31 and the tuning half, no stamp-only clock read
was labelled useful; the useful ones pass the value to a bound, a parameter, a path, a key or a mark.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.benign import STAMP_NAME
from airflow_idempotent.lint.notices import chat_helper
from airflow_idempotent.lint.pyfacts import clock_call, clock_calls_at, is_random, is_relative, parents
from airflow_idempotent.lint.sendernames import name_parts
from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = ["RETURNED", "clock_destination"]

#: a relative window's reason (window mode) when a use of its value is its function's return value:
#: an XCom, data only if a task pulls it (`windowsinks` asks that once every task is known)
RETURNED = "its value is only returned, an XCom"

#: names (variables, keywords, dict keys, attributes) that say the value is a timer's, a log's or a
#: message's, or the clock itself (``now``); a stamp's are `benign.STAMP_NAME`: what a rerun changes
#: is only when it ran
_SHOWN = re.compile(
    r"(^|_)(log|logs|logged|started|start_time|end_time|finished|elapsed|duration|took|runtime|"
    r"message|msg|text|subject|title|body|caption|note|comment|report|alert|now|current)($|_)",
)


def _log_name(name: str) -> bool:
    """`name` says where a log goes: ``log`` as a word with a place's word (``LOG_PATH``, ``log_uri``,
    ``LogUri``, ``cluster_log_conf``, ``log_dir``; not ``catalog`` or ``login``), and no word of a date
    (``log_date`` is the day of a log record written: data, ilri's QA logger, a useful label). Such a
    value only dates the folder a run's logs go to (round 34c: a Databricks cluster's log folder)."""
    parts = set(name_parts(name))
    return bool(parts & {"log", "logs"}) and bool(parts & _PLACE) and not parts & _WHEN


#: words of a log's place, and of a date a log record may carry as data
_PLACE = frozenset({"path", "paths", "dir", "folder", "uri", "url", "conf", "config", "location", "prefix",
                    "destination", "bucket"})  # fmt: skip
_WHEN = frozenset({"date", "day", "dt", "ds", "time", "ts", "period", "month", "year", "week", "hour"})


def _log_reason(name: str) -> str:
    return f"its value only names a log path or folder ({name}), a stamp of where a run's logs go"


def _stamp(name: str) -> bool:
    """`name` says its value only stamps, times, logs or titles what is written."""
    return bool(STAMP_NAME.search(name) or _SHOWN.search(name))


#: words of a name whose value is a message's text (a relative window's only harmless names: a window
#: is no stamp, so ``start``, ``updated`` or ``startDate`` say data there, `windowsinks`)
_TEXT_WORDS = frozenset({"message", "msg", "text", "subject", "title", "body", "caption", "note", "comment",
                         "alert", "html", "log", "logs"})  # fmt: skip


def _shows_only(name: str, window: bool) -> bool:
    """`name` says its value only stamps, logs or titles what is written; for a relative window
    (`window`), only a message's text, read word by word (``startDate`` is a start and a date)."""
    if not window:
        return _stamp(name) and not _DATA.search(name)
    parts = name_parts(name)
    return bool(set(parts) & _TEXT_WORDS) and not _data_name("_".join(parts), window)


def _shown_as(window: bool, what: str = "what is written") -> str:
    return "the text of a message" if window else f"a stamp of {what}"


def _data_name(name: str, window: bool) -> bool:
    """`name` says its value is data (a bound, path, key, mark); word by word for a window."""
    return bool(_DATA.search("_".join(name_parts(name)) if window else name))


#: names that say the value is data the task reads or writes by: a bound, period, path, key or mark
_DATA = re.compile(
    r"(^|_)(date|dates|day|days|dt|ds|since|until|from|to|start|end|begin|period|month|year|week|"
    r"window|range|partition|prefix|path|paths|folder|dir|file|files|filename|key|id|snapshot|"
    r"version|target|filter|params|param|conf|mark|checkpoint|watermark|cursor|query|sql|url|endpoint|"
    r"bucket|table|batch|load|generated)($|_)",
    re.IGNORECASE,
)

#: calls that read or send data: the value as their argument decides what is read or written
_DATA_CALLS = frozenset(
    {
        "execute", "run", "query", "read_sql", "read_sql_query", "get_records", "get_pandas_df",
        "get_first", "get", "post", "put", "patch", "request", "urlopen", "download", "download_file",
        "fetch", "load", "copy", "list_objects", "list_objects_v2", "list_keys", "list_blobs",
        "read_csv", "read_parquet", "read_json", "where", "filter", "set", "xcom_push", "glob",
        "listdir", "exists", "open", "callproc", "insert_rows", "bulk_load", "to_csv", "to_parquet",
        "upload", "upload_file", "load_file", "put_object", "write",
    }
)  # fmt: skip

#: calls that only carry the value on (a format, a conversion): the use is where the result goes
_CARRY = frozenset(
    {
        "str", "int", "float", "strftime", "isoformat", "format", "date", "replace", "timestamp",
        "to_date_string", "to_datetime_string", "to_iso8601_string", "in_timezone", "astimezone",
        "combine", "join", "Timestamp", "to_datetime", "DateTime", "instance", "strptime", "upper",
        "lower", "strip", "split",
    }
)  # fmt: skip

#: calls that only show the value: a log line, a message, an exception's text
_SHOW = frozenset(
    {
        "print", "info", "debug", "warning", "warn", "error", "exception", "critical", "log",
        "send_message", "chat_postMessage", "send_email", "send", "notify", "Exception", "ValueError",
        "RuntimeError", "AirflowException", "AirflowSkipException", "AirflowFailException",
    }
)  # fmt: skip

#: calls that keep a value as state a later run or retry reads back: a stamped record kept so is data
_STATE_CALLS = frozenset({"set", "xcom_push", "set_state", "setdefault"})

_DEPTH = 4
_BODIES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)


def clock_destination(tree: ast.Module, line: int, window: bool = False) -> str | None:
    """Why a plain clock read at `line` of the module `tree` cannot change what a rerun reads or
    writes, or None when its value reaches data (or no clock call is found there: the finding
    stands). `window`: the read is itself a relative window's (IDEM004, `windowsinks`), so it is
    never the end of a window spelled beside it."""
    parent_of = parents(tree)
    calls = [call for call, name in clock_calls_at(tree, line) if not is_random(name)]
    if not calls:
        return None
    shown: list[str] = []
    for call in calls:
        verdict = _follow(call, parent_of, 0, set(), window=window)
        if verdict is None and not window:
            verdict = _window_end(call, parent_of)
        if verdict is None:
            return None
        shown.append(verdict)
    return RETURNED if RETURNED in shown else shown[0]


#: what holds the values handed on together: a list of a job's parameters, a dict, a call's arguments
_SIBLINGS = (ast.List, ast.Tuple, ast.Dict, ast.Call)


def _window_end(call: ast.Call, parent_of: dict[ast.AST, ast.AST]) -> str | None:
    """The read is the end of a relative window spelled beside it: ``["START_DATE=" + (now() -
    timedelta(days=n)).strftime(..), "END_DATE=" + now().strftime(..)]`` hands a job "the last n days
    up to now", one cause, reported as IDEM004 at the shifted read (as ``window_end = now()`` beside
    ``now() - timedelta(..)`` is, round 34c). The first list, tuple, dict or call (not a format or
    conversion) above the read must hold another clock read shifted by a span."""
    current: ast.AST = call
    parent = parent_of.get(call)
    while parent is not None and not isinstance(parent, ast.stmt):
        carried = isinstance(parent, ast.Call) and (
            current is parent.func or last_name(dotted(parent.func)) in _CARRY
        )
        if isinstance(parent, _SIBLINGS) and not carried:
            for node in ast.walk(parent):
                if (
                    isinstance(node, ast.Call)
                    and node is not call
                    and clock_call(node, None) is not None
                    and is_relative(node, parent_of)
                ):
                    return f"its value is the end of the relative window beside it (line {node.lineno})"
            return None
        current, parent = parent, parent_of.get(parent)
    return None


def _enclosing(node: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> ast.AST:
    current = parent_of.get(node)
    while current is not None and not isinstance(
        current, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module
    ):
        current = parent_of.get(current)
    return current if current is not None else node


def _follow(
    node: ast.AST,
    parent_of: dict[ast.AST, ast.AST],
    depth: int,
    seen: set[str],
    stamp: str | None = None,
    window: bool = False,
) -> str | None:
    """Climb from `node` (the clock's value, or a name holding it) to where it goes: None when it
    reaches data, else a short reason (stamp, log, timer). `stamp`: the value is already a stamp
    field of a record (the reason); the record is then data only where it is kept as state (Airflow's
    task-state example: a stamped result saved with ``task_state_store.set``, read back on a retry).
    `window`: the value is a relative window's (`clock_destination`)."""
    if depth > _DEPTH:
        return None
    current, parent = node, parent_of.get(node)
    while parent is not None:
        if stamp is not None:
            if isinstance(parent, ast.Call) and current is not parent.func:
                return None if last_name(dotted(parent.func)) in _STATE_CALLS else stamp
            if isinstance(parent, ast.Assign | ast.AnnAssign):
                return _follow_targets(_targets(parent), parent, parent_of, depth, seen, stamp, window)
            if isinstance(parent, ast.keyword):
                call = parent_of.get(parent)
                stateful = isinstance(call, ast.Call) and last_name(dotted(call.func)) in _STATE_CALLS
                return None if stateful else stamp
            if isinstance(parent, ast.stmt):
                return stamp
            current, parent = parent, parent_of.get(parent)
            continue
        if isinstance(parent, ast.Compare | ast.IfExp) or (
            isinstance(parent, ast.If | ast.While) and parent.test is current
        ):
            return None  # a bound or a branch: it selects what is read or done
        if isinstance(parent, ast.keyword):
            name = parent.arg or ""
            if _log_name(name):
                return _log_reason(f"{name}=")
            if _shows_only(name, window):
                return f"its value is only {name}=, {_shown_as(window)}"
            call = parent_of.get(parent)
            if isinstance(call, ast.Call) and last_name(dotted(call.func)) in _SHOW:
                return "its value is only shown in a log line or message"
            return None  # an argument of a call: an operator's, a request's, a query's
        if isinstance(parent, ast.Dict):
            key = _key_of(parent, current)
            if key is not None and _log_name(key):
                return _log_reason(repr(key))
            if key is not None and _shows_only(key, window):
                stamp = f"its value is only the {key!r} field, {_shown_as(window, 'the record written')}"
                current, parent = parent, parent_of.get(parent)
                continue
            if key is not None and _data_name(key, window):
                return None
        elif isinstance(parent, ast.Call) and current is not parent.func:
            func = last_name(dotted(parent.func))
            if func in _SHOW:
                return "its value is only shown in a log line or message"
            if chat_helper(func):  # round 36i: a repository's own chat-posting helper
                return f"its value is only the text of a chat message ({func}())"
            if func in _DATA_CALLS:
                return None
            if func not in _CARRY:
                return None  # handed to code the linter does not follow: the finding stands
        elif isinstance(parent, ast.Return):
            return RETURNED if window else None  # returned (an XCom a later task may read by it)
        elif isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign):
            return _follow_targets(_targets(parent), parent, parent_of, depth, seen, window=window)
        elif isinstance(parent, ast.stmt):
            if isinstance(parent, ast.Expr):
                return "its value is not kept"
            return None
        current, parent = parent, parent_of.get(parent)
    return None


def _targets(statement: ast.Assign | ast.AnnAssign | ast.AugAssign) -> list[ast.expr]:
    """The names an assignment stores its value in."""
    return list(statement.targets) if isinstance(statement, ast.Assign) else [statement.target]


def _key_of(mapping: ast.Dict, value: ast.AST) -> str | None:
    for key, item in zip(mapping.keys, mapping.values, strict=False):
        if item is value and isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _follow_targets(
    targets: list[ast.expr],
    statement: ast.stmt,
    parent_of: dict[ast.AST, ast.AST],
    depth: int,
    seen: set[str],
    stamp: str | None = None,
    window: bool = False,
) -> str | None:
    reasons: list[str] = []
    for target in targets:
        if isinstance(target, ast.Attribute | ast.Subscript):
            name = target.attr if isinstance(target, ast.Attribute) else _subscript_key(target)
            if stamp is None and name is not None and _log_name(name):
                reasons.append(_log_reason(name))
                continue
            if stamp is None and name is not None and _shows_only(name, window):
                reasons.append(f"its value is only {name}, {_shown_as(window)}")
                continue
            return None
        if not isinstance(target, ast.Name):
            return None
        name = target.id
        if _data_name(name, window) and stamp is None and not _log_name(name):
            return None  # a log-named variable (``LOG_PATH``): its uses decide
        if name in seen:
            continue
        seen.add(name)
        body = _enclosing(statement, parent_of)
        uses = [
            n
            for n in ast.walk(body)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ]
        if not uses:
            reasons.append(f"its value ({name}) is never read")
            continue
        for use in uses:
            verdict = _follow(use, parent_of, depth + 1, seen, stamp, window)
            if verdict is None:
                return None
            reasons.append(verdict)
        if _stamp(name) and not window:
            reasons.insert(0, f"its value ({name}) only stamps, times or logs")
    if RETURNED in reasons:
        return RETURNED
    return reasons[0] if reasons else None


def _subscript_key(target: ast.Subscript) -> str | None:
    key = target.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None

"""Where a value ends as text: read by people (a log line, a notice, a file's name), or rendered.

A clock value that only becomes text people read, or names a file, is no data window: a rerun a day
late prints another date, and reads and writes the same data. `pyfacts.clock_use` asks these
functions where a clock read's value ends; the names it is assigned to are followed with
`name_loads` and `assigned_name`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from airflow_idempotent.lint.notices import NOTICE_CALLEE
from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = [
    "PASS",
    "TEXT_METHODS",
    "as_text",
    "assigned_name",
    "assignment",
    "ends_in_text",
    "is_log_call",
    "labels_only",
    "name_loads",
    "names_file",
    "value_ends",
]

#: methods that turn a datetime into text: past one of them, ``+`` concatenates strings, shifts nothing
TEXT_METHODS = frozenset(
    {"strftime", "isoformat", "format", "to_date_string", "to_datetime_string", "to_iso8601_string", "ctime"}
)

#: where a clock's text only labels something: a file's name or path, an e-mail's subject, a title
_LABEL_NAME = re.compile(
    r"(?:^|_)(?:file|filename|fname|path|dir|pdf|png|jpg|csv|xlsx?|html|subject|title|caption|heading)s?$",
    re.IGNORECASE,
)


_FILE_SUFFIX = re.compile(r"\.(?:pdf|png|jpe?g|svg|csv|tsv|xlsx?|json|txt|zip|gz|html?|log)$", re.IGNORECASE)


def name_loads(body: ast.AST, name: str) -> list[ast.Name]:
    """Every place `body` reads the local name `name` (its loads, not its assignments)."""
    return [
        n for n in ast.walk(body) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    ]


def labels_only(stmt_or_kw: ast.AST, value: ast.AST) -> bool:
    """The text is only a label: assigned to a file/path/subject-like name, passed as such a keyword
    (``subject=``), or an HTML fragment (an f-string with markup: a report's "Report Date"). Never an
    object store's URL (``s3://bucket/{now():%Y-%m-%d}/x.csv``): there the date places the data."""
    if any(
        isinstance(v, ast.Constant) and isinstance(v.value, str) and "://" in v.value for v in ast.walk(value)
    ):
        return False
    if isinstance(stmt_or_kw, ast.keyword):
        return bool(stmt_or_kw.arg and _LABEL_NAME.search(stmt_or_kw.arg)) or _backup_name(stmt_or_kw, value)
    if isinstance(stmt_or_kw, ast.Assign) and len(stmt_or_kw.targets) == 1:
        target = stmt_or_kw.targets[0]
        if isinstance(target, ast.Name) and _LABEL_NAME.search(target.id):
            return True
    if isinstance(stmt_or_kw, ast.Assign) and any(
        isinstance(v, ast.Constant) and isinstance(v.value, str) and _FILE_SUFFIX.search(v.value)
        for v in ast.walk(value)
    ):
        return True  # output_dir + 'Daily-Report-' + today().strftime('%Y%m%d') + '.pdf'
    return isinstance(value, ast.JoinedStr) and any(
        isinstance(v, ast.Constant) and isinstance(v.value, str) and re.search(r"<\w+[^>]*>", v.value)
        for v in value.values
    )


#: a destination table's keyword (``destination_project_dataset_table``, ``destination_table``)
_DESTINATION = re.compile(r"destination\w*table", re.IGNORECASE)
_BACKUP = re.compile(r"backup|bkp", re.IGNORECASE)


def _backup_name(keyword: ast.keyword, value: ast.AST) -> bool:
    """The text names a backup copy's table: a destination table's f-string that says backup in a
    piece of its own (``f"{backups_dataset}.{table}_{curr_date}"``, round 27c: CSET's BigQuery copies
    into their ``_backups`` dataset). The date names the copy, as a file's name would; a rerun on
    another day takes another copy, and no task reads it as data."""
    if not (keyword.arg and _DESTINATION.search(keyword.arg) and isinstance(value, ast.JoinedStr)):
        return False
    for piece in value.values:
        inner = piece.value if isinstance(piece, ast.FormattedValue) else piece
        text = inner.id if isinstance(inner, ast.Name) else getattr(inner, "value", None)
        if isinstance(text, str) and _BACKUP.search(text):
            return True
    return False


_FILE_CALLS = frozenset({"open", "Path", "join", "makedirs", "mkdir", "savefig"})


def names_file(call: ast.Call) -> bool:
    """A call whose arguments are a file's name or path (``open``, ``Path``, ``os.path.join``..)."""
    return last_name(dotted(call.func)) in _FILE_CALLS


def as_text(parent: ast.AST, node: ast.AST) -> bool:
    """`parent` turns the clock value `node` into text: ``now().strftime(..)``, ``str(now())``,
    ``f"{now()}"``; a ``+`` above it is string concatenation (``'Report-' + today().strftime(..)``)."""
    if isinstance(parent, ast.Attribute) and parent.attr in TEXT_METHODS:
        return True
    if isinstance(parent, ast.Call) and node in parent.args and dotted(parent.func) == "str":
        return True
    return isinstance(parent, ast.FormattedValue | ast.JoinedStr)


_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


def is_log_call(call: ast.Call) -> bool:
    """``print(..)``, ``log.info(..)``, ``logging.warning(..)``, ``self.log.debug(..)``: output only."""
    name = dotted(call.func)
    if name in ("print", "pprint", "pprint.pprint"):
        return True
    parts = name.split(".")
    return len(parts) >= 2 and parts[-1] in _LOG_METHODS and "log" in parts[-2].lower()


def assignment(node: ast.AST | None) -> tuple[ast.AST | None, ast.AST | None]:
    """(target, value) of a one-target assignment (``x = v``, ``self.x = v``, ``x: T = v``), else
    (None, None)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0], node.value
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.target, node.value
    return None, None


def assigned_name(stmt: ast.AST | None) -> str | None:
    """The one plain name `stmt` assigns (``x = ..``), else None (tuples, attributes, several)."""
    target, _ = assignment(stmt) if isinstance(stmt, ast.Assign) else (None, None)
    return target.id if isinstance(target, ast.Name) else None


#: what a sink answers for a node the value flows through: it flows on
PASS = object()

#: a sink: (parent, child, state, depth) -> (an end, None or `PASS`; the state flowing on)
Sink = Callable[[ast.AST, ast.AST, Any, int], tuple[object, Any]]


def value_ends(
    node: ast.AST,
    root: ast.AST,
    parents: dict[ast.AST, ast.AST],
    sink: Sink,
    state: object,
    depth: int,
    limit: int,
    unread: object = None,
) -> list[object] | None:
    """Where the value of `node` ends, one walk for every "where does this value go" question.

    Climbs `node`'s parents (of `root`); at each, ``sink(parent, child, state, depth)`` answers an
    end (the value ends there), None (a use not known to end well: the walk fails), or `PASS` (it
    flows on, with the state the sink returns). A statement that assigns the value to one plain
    name (``x = ..``) is not asked: every read of that name in the enclosing function (else
    `root`) is followed the same way, one level deeper (`unread` when there is none). The ends of
    every path, or None when one fails or the walk goes deeper than `limit`."""
    if depth > limit:
        return None
    child, parent = node, parents.get(node)
    while parent is not None:
        target, _ = assignment(parent)
        if isinstance(target, ast.Name):
            name = target.id
            owner = parents.get(parent)
            while owner is not None and not isinstance(owner, ast.FunctionDef | ast.AsyncFunctionDef):
                owner = parents.get(owner)  # a name assigned in a function is read in that function only
            uses = name_loads(owner or root, name)
            if not uses:
                return None if unread is None else [unread]
            ends: list[object] = []
            for use in uses:
                more = value_ends(use, root, parents, sink, state, depth + 1, limit, unread)
                if more is None:
                    return None
                ends.extend(more)
            return ends
        answer, state = sink(parent, child, state, depth)
        if answer is None:
            return None
        if answer is not PASS:
            return [answer]
        child, parent = parent, parents.get(parent)
    return None


#: methods that fill a template with values: Jinja's ``template.render(..)`` and its streaming form
_RENDER_METHODS = frozenset({"render", "render_async", "stream"})


def ends_in_text(
    node: ast.AST, body: ast.AST, parents: dict[ast.AST, ast.AST], depth: int, text: bool = False
) -> set[str] | None:
    """Principle (IDEM004): a span-shifted clock value whose every use ends as an argument of a
    template's ``render(..)`` (directly, as text: ``"datetime({}, {}, {})".format(now.year, ..)``, or
    through the names it is assigned to) is written into a generated file, say as a generated DAG's
    ``start_date`` (semio's ``utcnow() - timedelta(days=1)``): no data is read over that span, so it
    is no window (``"rendered"``; the generated file is linted on its own). Round 11: one whose every
    use ends, once made text, in a log call or in a call named for a notice (`notices.NOTICE_CALLEE`:
    ``send_notification(f"{yesterday}: ..")``) only dates a message people read (``"output"``)."""
    ends = value_ends(node, body, parents, _text_sink, text, depth, 3)
    return {str(end) for end in ends} if ends else None


def _text_sink(parent: ast.AST, child: ast.AST, text: bool, _depth: int) -> tuple[object, bool]:
    """`ends_in_text`'s sink: a template's render, or (once text) a log or notice call, ends it."""
    if isinstance(parent, ast.stmt):
        return None, text
    text = text or as_text(parent, child)
    if isinstance(parent, ast.Call) and child is not parent.func:
        if isinstance(parent.func, ast.Attribute) and parent.func.attr in _RENDER_METHODS:
            return "rendered", text
        if text and (is_log_call(parent) or NOTICE_CALLEE.search(last_name(dotted(parent.func)))):
            return "output", text
        if not (isinstance(parent.func, ast.Attribute) and parent.func.attr in TEXT_METHODS):
            return None, text  # passed to any other call: what it does there is not known
    if isinstance(parent, ast.Compare | ast.Subscript | ast.BoolOp):
        return None, text
    return PASS, text

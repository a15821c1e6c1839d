"""Where a relative window's clock value goes: IDEM004 is a defect only where it can reach data
(issue 35, round 36d, lint57; evidence in docs/lint-evaluation.md).

Principle: "the last N hours before now" loses or doubles data only where the window decides what a
task reads into, or writes to, something that persists: a query's filter, a path, partition or key
written, a call's argument. Held out, 47% of IDEM004's findings were acted on; the rest were windows
whose value reaches nothing (never read, a bare expression), only a message, a log line or a title.
So is a retention cutoff: a value whose every use ends in deleting what is older than it (the
greater side of ``<``/``<=`` in a ``.filter(..).delete()``, an ``if`` whose body deletes, the
``WHERE .. <`` of a ``DELETE``/``DROP`` text, or an argument of a call named for deleting): a late run
deletes as much, and what one run leaves the next one takes. Such a window is information, with the
reason; where the value reaches a call the linter does not follow, any other comparison, a name that
says date, bound, path or key, or a return value, the finding stands (recall is not traded for it).
The value is followed by the same code as IDEM003's severity (`sinks.clock_destination`, never the
end of a window spelled beside it) and, for the cutoff, by `textuse.value_ends`.
"""

from __future__ import annotations

import ast
import functools
import re

from airflow_idempotent.lint.pyfacts import clock_calls_at, is_relative, parents
from airflow_idempotent.lint.sinks import RETURNED, clock_destination
from airflow_idempotent.lint.syntax import dotted, last_name
from airflow_idempotent.lint.textuse import PASS, value_ends

__all__ = ["RETURNED", "WINDOW_INFO_TAIL", "window_destination"]

#: what the information says would make the window a defect
WINDOW_INFO_TAIL = (
    "no data a rerun reads or writes is chosen by it, so it is not raised as a defect; it would be one "
    "if the value reached a query's filter, a path, partition or key written, or a call the linter "
    "does not follow"
)


def window_destination(tree: ast.Module | None, line: int) -> str | None:
    """Why the relative window read at `line` of `tree` reaches no data (its value is never read,
    not kept, only shown in a message or log line, only a stamp or a log's folder), or None when it may
    reach data or the linter cannot tell (no Python clock call on that line: a template, SQL, bash)."""
    if tree is None:
        return None
    return clock_destination(tree, line, window=True) or _retention_cutoff(tree, line)


#: a call that deletes (``os.remove``, ``shutil.rmtree``, ``S3DeleteObjectsOperator``, ``.delete()``)
_DELETES = re.compile(r"(?i)delete|remove|unlink|rmtree|rmdir|purge|drop|expire|prune|clean_?up")
#: a SQL text that deletes, and a placeholder's text ending in "less than" (``WHERE d < '{cutoff}'``)
_DELETE_SQL = re.compile(r"(?is)\b(delete\s+from|delete\b|drop\s+(table|partition)|vacuum)")
_LESS_THAN = re.compile(r"<=?\s*['\"]?\s*$")
#: methods and conversions that carry the cutoff on as the same point in time
_CARRY = frozenset({"strftime", "isoformat", "astimezone", "date", "replace", "timestamp", "str", "int",
                    "to_date_string", "to_datetime_string", "in_timezone", "format"})  # fmt: skip
_LIMIT = 3


def _retention_cutoff(tree: ast.Module, line: int) -> str | None:
    """Why the relative window read at `line` is only a retention cutoff (every use of its value
    deletes what is older), or None."""
    parent_of = parents(tree)
    calls = [call for call, _ in clock_calls_at(tree, line) if is_relative(call, parent_of)]
    if not calls:
        return None
    for call in calls:
        sink = functools.partial(_cutoff_sink, parent_of)
        ends = value_ends(call, tree, parent_of, sink, None, 0, _LIMIT)
        if not ends or "cutoff" not in ends:
            return None
    return "it is only a retention cutoff (what is older than it is deleted): a late run deletes as much"


def _cutoff_sink(
    parent_of: dict[ast.AST, ast.AST], parent: ast.AST, child: ast.AST, state: object, _depth: int
) -> tuple[object, object]:
    """`value_ends`' sink for a cutoff: a delete of what is older ends it; a carry passes it on."""
    if isinstance(parent, ast.Compare):
        older = len(parent.ops) == 1 and (
            (isinstance(parent.ops[0], ast.Lt | ast.LtE) and parent.comparators[0] is child)
            or (isinstance(parent.ops[0], ast.Gt | ast.GtE) and parent.left is child)
        )
        return ("cutoff" if older and _deletes_by(parent, parent_of) else None), state
    if isinstance(parent, ast.Call):
        name = last_name(dotted(parent.func))
        if child is parent.func or name in _CARRY:
            if child is parent.func and name in _CARRY and _reassigned(parent, parent_of):
                return "reassigned", state  # ``cutoff = cutoff.astimezone(..)``: its reads are followed
            return (PASS if name in _CARRY else None), state
        return ("cutoff" if _DELETES.search(name) else None), state
    if isinstance(parent, ast.JoinedStr):  # a DELETE's text ends it; other text goes on to its use
        return ("cutoff" if _deleting_text(parent, child) else PASS), state
    if isinstance(
        parent, ast.FormattedValue | ast.Attribute | ast.BinOp | ast.keyword | ast.List | ast.Tuple
    ):
        return PASS, state
    return None, state


def _reassigned(call: ast.Call, parent_of: dict[ast.AST, ast.AST]) -> bool:
    """``x = x.astimezone(..)``: a method of a name stored back in that name."""
    statement = parent_of.get(call)
    return (
        isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and isinstance(statement, ast.Assign)
        and statement.value is call
        and [dotted(t) for t in statement.targets] == [call.func.value.id]
    )


def _deletes_by(compare: ast.Compare, parent_of: dict[ast.AST, ast.AST]) -> bool:
    """The comparison chooses what is deleted: the test of an ``if`` whose body deletes, or a filter
    in a chain of calls that deletes (``query.filter(XCom.timestamp < cutoff).delete()``)."""
    node: ast.AST = compare
    parent = parent_of.get(node)
    while isinstance(parent, ast.BoolOp | ast.UnaryOp):
        node, parent = parent, parent_of.get(parent)
    if isinstance(parent, ast.If) and node is parent.test:
        return any(
            isinstance(n, ast.Call) and _DELETES.search(last_name(dotted(n.func)))
            for stmt in parent.body
            for n in ast.walk(stmt)
        )
    while parent is not None and not isinstance(parent, ast.stmt):
        if isinstance(parent, ast.Call) and _DELETES.search(last_name(dotted(parent.func))):
            return True
        parent = parent_of.get(parent)
    return False


def _deleting_text(text: ast.JoinedStr, part: ast.AST) -> bool:
    """`part` fills a DELETE (or DROP) text right after a "less than": ``WHERE d < '{cutoff}'``."""
    literal = [v.value for v in text.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if not _DELETE_SQL.search(" ".join(literal)) or part not in text.values:
        return False
    before = text.values[: text.values.index(part)]
    head = before[-1] if before else None
    return (
        isinstance(head, ast.Constant) and isinstance(head.value, str) and bool(_LESS_THAN.search(head.value))
    )

"""Records a job keeps about itself: a failed attempt's error record, an entry of the job's own log,
a backup named by when it was taken. A clock value that reaches only such a record decides no data.

Principles (IDEM003, round 13; tuning evidence in docs/lint-evaluation.md):

- **A failure record.** A clock read in an ``except`` handler whose value never leaves that handler
  (the read and every use of the name it is assigned to lie inside it, none is returned) stamps what
  the handler records about the failure, when the handler ends by raising again: the attempt fails
  either way, and the retry runs the ``try`` body, whose data comes from other values. A handler
  that does not raise is a fallback path that may write data, so there the value must only reach a
  call named for writing a log (below).
- **The job's own log.** A clock value whose every use is an argument of a call named for writing
  a log entry (``log_error_message(..)``, ``write_to_execution_logs(..)``, ``save_pipeline_log(..)``):
  a rerun adds its own entry with its own time, which is what a log is for. Calls that read or move
  logs (``fetch_logs``, ``load_logs``, ``export_logs``) are data and are not read as log writes.
- **A log writer.** Round 30b: every clock read in a function named for writing a log entry
  (``escribir_log_txt``, whose ``now()`` stamps the line and names the file) stamps that entry.
- **A backup.** A clock read in a function named for archiving or backing up
  (``_archive_runtime_path``) names the copy by when it was taken: a rerun takes another copy.

Decided by where the value flows and what the code names the call or function, never by the value
itself; a value that also reaches a return, XCom or any other call stays a finding.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.syntax import dotted, last_name
from airflow_idempotent.lint.textuse import assigned_name, name_loads

__all__ = ["ARCHIVE_TEXT", "FAILURE_TEXT", "LOG_TEXT", "archived", "own_record"]

FAILURE_TEXT = (
    "only stamps the failed attempt's error record (read in an except handler that raises again): "
    "if this runs twice, each failed attempt records its own time, and the retry's data comes from "
    "other values"
)
LOG_TEXT = (
    "only stamps an entry of the job's own log (every use is an argument of a log-writing call): if "
    "this runs twice, the log gets a second entry with its own time, and no data comes from it"
)
ARCHIVE_TEXT = (
    "only names a backup copy by when it was taken (the function archives or backs up): if this runs "
    "twice, a second copy is kept beside the first, and no data is read or written by the time"
)

#: A call that writes an entry to a log: ``log_`` as its verb, or a writing verb whose object is a log.
#: Round 30b: Spanish and Portuguese verbs too (``registrar_log(..)``, ``escribir_log_txt(..)``), and
#: a log named with its medium after it (``_txt``, ``_file``, ``_entry``).
_LOG_WRITER = re.compile(
    r"^_?log_[a-z]|^_?(?:write|save|insert|add|record|append|put|store|push|register|registrar|guardar"
    r"|insertar|escribir|grabar|gravar|salvar|escrever|inserir)(?:_\w+)?_logs?(?:_(?:txt|text|file|entry"
    r"|line|row))?$",
    re.I,
)
#: A function that keeps a copy of something as it is now.
_ARCHIVE_NAME = re.compile(r"archive|backup|back_up", re.I)


def archived(fn: ast.AST) -> str | None:
    """ARCHIVE_TEXT when `fn` is named for archiving or backing up (the backup principle above)."""
    return ARCHIVE_TEXT if _ARCHIVE_NAME.search(getattr(fn, "name", "")) else None


def _statement(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[ast.AST, ast.AST | None]:
    """The outermost expression holding `node`, and the statement it belongs to."""
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, ast.stmt):
        child, parent = parent, parents.get(parent)
    return child, parent


def _inside(node: ast.AST, holder: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node is not None:
        if node is holder:
            return True
        node = parents.get(node)  # type: ignore[assignment]
    return False


def _handler(node: ast.AST, fn: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.ExceptHandler | None:
    """The innermost ``except`` handler of `fn` around `node`."""
    above = parents.get(node)
    while above is not None and above is not fn:
        if isinstance(above, ast.ExceptHandler):
            return above
        above = parents.get(above)
    return None


def _uses(node: ast.AST, body: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[ast.AST] | None:
    """Where the clock value goes: the expression it is written in, or every load of the one name it
    is assigned to (None when it is assigned to anything else, or returned)."""
    expr, stmt = _statement(node, parents)
    if isinstance(stmt, ast.Return):
        return None
    if isinstance(stmt, ast.Assign) and expr is stmt.value:
        name = assigned_name(stmt)
        loads = name_loads(body, name) if name is not None else []
        return list(loads) or None
    return [node] if isinstance(stmt, ast.Expr) else None


def _log_argument(use: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """`use` is an argument (positional or keyword, directly or after a method such as
    ``.strftime(..)``) of a call named for writing a log entry."""
    child, parent = use, parents.get(use)
    while isinstance(parent, ast.Attribute) and parent.value is child:
        call = parents.get(parent)
        if not (isinstance(call, ast.Call) and call.func is parent):
            return False
        child, parent = call, parents.get(call)
    if isinstance(parent, ast.keyword):
        child, parent = parent, parents.get(parent)
    if not isinstance(parent, ast.Call) or child is parent.func:
        return False
    return bool(_LOG_WRITER.search(last_name(dotted(parent.func))))


def own_record(node: ast.AST, fn: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """Why the clock read `node` in `fn` only stamps a record the job keeps about itself (the text of
    the information entry), or None (the principles above)."""
    if _LOG_WRITER.search(getattr(fn, "name", "")):
        return LOG_TEXT  # the function writes a log entry: its clock stamps the entry
    uses = _uses(node, fn, parents)
    if uses is None:
        return None
    if any(isinstance(parents.get(u), ast.Return) for u in uses):
        return None
    handler = _handler(node, fn, parents)
    if handler is not None and all(_inside(u, handler, parents) for u in uses):
        returns = any(isinstance(n, ast.Return | ast.Yield) for n in ast.walk(handler))
        if handler.body and isinstance(handler.body[-1], ast.Raise) and not returns:
            return FAILURE_TEXT
    if all(_log_argument(u, parents) for u in uses):
        return LOG_TEXT
    return None

"""A relative window whose value only its task returns: an XCom no task pulls (issue 35, round 36d).

`windowsinks.window_destination` answers `sinks.RETURNED` when every use of a window's value ends in
its task callable's return value (or in no data). Whether that is data depends on the other tasks,
known only once every file is read: the finding is kept, and demoted here when no task can read the
XCom (`returned_to_no_task`). Any doubt keeps it: a TaskFlow output kept in a name or passed on, a
quoted task id elsewhere in the repository (a template's or a callable's ``xcom_pull``), a pull by
a variable, ``.output`` or ``XComArg``.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.findings import Recorder, TaskCheck
from airflow_idempotent.lint.pyfacts import parents
from airflow_idempotent.lint.scope import Workspace
from airflow_idempotent.lint.syntax import dotted, last_name
from airflow_idempotent.lint.windowsinks import RETURNED, WINDOW_INFO_TAIL

__all__ = ["check_returned_windows", "returned_to_no_task"]


#: an ``xcom_pull`` naming the task it pulls by a literal (``xcom_pull('t')``, ``task_ids=['t']``)
_NAMED_PULL = re.compile(r"xcom_pull\(\s*(?:task_ids\s*=\s*)?[\[(]?\s*['\"]")
_ANY_PULL = re.compile(r"xcom_pull\(|XComArg\(|\.output\b")


def returned_to_no_task(task: TaskDef, checks: list[TaskCheck], workspace: Workspace) -> bool:
    """No task can read `task`'s return value (its XCom): no TaskFlow task takes its output, no text
    of the repository names its id in quotes outside its own definition, and no pull there is by
    anything but a literal task id (``.output``, ``XComArg``, ``xcom_pull(task_ids=ids)`` may be
    any task's). A TaskFlow task's call must be a statement of its own or an operand of ``>>``/``<<``."""
    if any(task.task_id in c.task.inputs for c in checks):
        return False
    quoted = re.compile(rf"['\"]{re.escape(task.task_id)}['\"]")
    for src in workspace.sources.values():
        for number, text in enumerate(src.lines, start=1):
            own = src is task.scope.source and task.line <= number <= task.end_line
            if (quoted.search(text) and not own) or (_ANY_PULL.search(text) and not _NAMED_PULL.search(text)):
                return False
    return task.decorator is None or _output_unused(task)


def _output_unused(task: TaskDef) -> bool:
    """The TaskFlow call that makes `task` keeps no output: a bare statement, or only ordered."""
    tree = task.scope.tree
    parent_of = parents(tree)
    names = {getattr(f, "name", None) for f in task.functions}
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and n.lineno == task.line and last_name(dotted(n.func)) in names
    ]
    if not calls:
        return False
    for call in calls:
        node: ast.AST = call
        parent = parent_of.get(node)
        while isinstance(parent, ast.BinOp | ast.List | ast.Tuple) and (
            not isinstance(parent, ast.BinOp) or isinstance(parent.op, ast.RShift | ast.LShift)
        ):
            node, parent = parent, parent_of.get(parent)
        if not isinstance(parent, ast.Expr):
            return False
    return True


def check_returned_windows(checks: list[TaskCheck], recorder: Recorder, workspace: Workspace) -> None:
    """A window whose value only its task returns is information when no task reads that XCom."""
    by_task: dict[tuple[str | None, str | None], TaskDef] = {
        (c.task.dag_id, c.task.task_id): c.task for c in checks
    }
    for file, line, dag_id, task_id in recorder.returned_windows:
        task = by_task.get((dag_id, task_id))
        if task is None or not returned_to_no_task(task, checks, workspace):
            continue
        for found in [
            f
            for f in recorder.findings
            if f.rule == "IDEM004" and (f.file, f.line, f.dag_id, f.task_id) == (file, line, dag_id, task_id)
        ]:
            recorder.picks_no_data.add((file, line))
            recorder.demote(
                found,
                f"{found.message.split(';')[0]}, but {RETURNED} no task pulls (no task takes its output, "
                f"and no pull names {task_id}); {WINDOW_INFO_TAIL}",
            )

"""The PySpark script a ``SparkSubmitOperator(application="job.py")`` submits (issue 35, lint41).

The DAG file says only where the script is; what the task does (``df.write.mode("append")``, a
clock read) is written in the script. When the path names a Python file of the linted tree (beside
the DAG file, below a linted root, or where a deployed path lands, as a SQL file is found), the
script's top-level code is read as the task's own code, in the script's scope, so its findings
point at the script's lines. A path known only at run time (a template, a Variable) is skipped, as
other file references are (round 31: 8 missed appends).
"""

from __future__ import annotations

import ast
import posixpath
from pathlib import Path

from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.source import deployed_path, found_file

__all__ = ["attach_submitted_script"]

_SUBMIT_OPERATORS = frozenset({"SparkSubmitOperator"})


def attach_submitted_script(task: TaskDef) -> None:
    """Add the submitted script's top level to the task's functions (read in the script's scope)."""
    found = _submitted_script(task)
    if found is None or any(id(fn) in task.homes and task.homes[id(fn)] is found[1] for fn in task.functions):
        return
    body, scope = found
    task.functions.append(body)
    task.homes[id(body)] = scope


def _submitted_script(task: TaskDef) -> tuple[ast.FunctionDef, Scope] | None:
    if task.operator not in _SUBMIT_OPERATORS:
        return None
    named = task.scope.string(task.kwargs.get("application"))
    if named is None or named.unresolved or not named.text.endswith(".py"):
        return None
    path = _script_path(named.text, task.scope)
    script = task.scope.workspace.scope(path) if path is not None else None
    if script is None or script.source is task.scope.source:
        return None
    # the module's statements as one function: the check reads a task's code function by function
    body = ast.FunctionDef(
        name=path.stem if path is not None else "script",
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=script.tree.body or [ast.Pass()],
        decorator_list=[],
        returns=None,
        lineno=1,
        col_offset=0,
    )
    return body, script


def _script_path(text: str, scope: Scope) -> Path | None:
    """The script's file in the checkout: beside the DAG file, below a linted root, or where a
    deployed (or working-directory-relative) path lands (`deployed_path`)."""
    here = scope.source.path
    found = found_file(text, [here.parent, *scope.workspace.roots], here)
    if found is None and not posixpath.isabs(text):
        found = deployed_path("/" + text, here)
    return found if found is not None and found.is_file() else None

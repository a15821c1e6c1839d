"""Which decorator a function has: ``@task`` (and ``@task.virtualenv`` ..), ``@dag``, ``@task_group``.

Read by `collect` (what a ``def`` in a DAG file makes) and by `codechecks` (a ``@task`` function
called from any module only adds a task); one reading so both agree on what is a TaskFlow task.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.scope import FunctionNode
from airflow_idempotent.lint.syntax import dotted, keywords, last_name

__all__ = ["builds_task", "decorator_kwargs", "decorator_name", "task_decorator"]


def decorator_name(node: ast.expr) -> str:
    """The dotted name of a decorator, called (``@task(retries=2)``) or not (``@task``)."""
    return dotted(node.func if isinstance(node, ast.Call) else node)


def task_decorator(fn: FunctionNode) -> tuple[str, dict[str, ast.expr]] | None:
    """`fn`'s ``@task`` / ``@task.<kind>`` decorator: its name and keyword arguments; None without one."""
    for deco in fn.decorator_list:
        name = decorator_name(deco)
        if name == "task" or name.startswith("task."):
            return name, keywords(deco) if isinstance(deco, ast.Call) else {}
    return None


def builds_task(fn: FunctionNode | ast.Lambda) -> bool:
    """`fn` is ``@task``-decorated: calling it (in a DAG body, from any module) only adds a task."""
    return not isinstance(fn, ast.Lambda) and task_decorator(fn) is not None


def decorator_kwargs(fn: FunctionNode, wanted: str) -> dict[str, ast.expr] | None:
    """The keyword arguments of `fn`'s ``@dag`` / ``@task_group`` decorator; None without one."""
    for deco in fn.decorator_list:
        if last_name(decorator_name(deco)) == wanted:
            return keywords(deco) if isinstance(deco, ast.Call) else {}
    return None

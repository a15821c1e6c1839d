"""What the collector finds in a DAG file: the DAGs and tasks, as every check reads them.

Kept apart from `collect` (which walks the syntax tree to find them) so the checks that only read
a DAG's or a task's arguments and code depend on these records, not on the walk.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from airflow_idempotent.lint.scope import Scope

__all__ = ["DagDef", "TaskDef"]


@dataclass
class DagDef:
    """A DAG found in a file: its id, arguments, default_args and tasks."""

    dag_id: str
    scope: Scope
    line: int
    end_line: int
    kwargs: dict[str, ast.expr]
    default_args: dict[str, ast.expr]
    tasks: list[TaskDef] = field(default_factory=list)
    #: arguments a DAG factory's parameter defaults give (written in the factory's file, not here)
    inherited: frozenset[str] = frozenset()

    @property
    def file(self) -> str:
        return self.scope.source.display


@dataclass
class TaskDef:
    """A task found in a file: its id (with its task group's prefix), operator, arguments and code."""

    task_id: str
    dag: DagDef | None
    scope: Scope
    line: int
    end_line: int
    operator: str
    kwargs: dict[str, ast.expr]
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = field(default_factory=list)
    decorator: str | None = None
    #: arguments given to ``.expand()``: each item is one mapped task instance's value
    mapped: frozenset[str] = frozenset()
    #: TaskFlow tasks whose output this task takes as an argument (their task ids)
    inputs: tuple[str, ...] = ()
    #: a custom operator of the repository: its class and the repository's classes it derives from
    #: (own first); its ``execute`` is the task's code (`operator_execute`)
    classes: list[tuple[ast.ClassDef, Scope]] = field(default_factory=list)
    #: the scope a function of `functions` is read in when another module defines it (`callables`)
    homes: dict[int, Scope] = field(default_factory=dict)

    @property
    def dag_id(self) -> str | None:
        return self.dag.dag_id if self.dag else None

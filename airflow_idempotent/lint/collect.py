"""The DAGs and tasks of a DAG file, found the way Airflow would attach them, from its syntax tree.

``with DAG(...)``, ``dag = DAG(...)`` with ``dag=dag``, ``@dag`` functions, task groups (their id
prefixes the task's), classic operators (``task_id=``, ``.partial``) and TaskFlow calls
(``fn()``, ``fn.override(task_id=...)()``, ``fn.partial().expand()``, repeated calls numbered ``__1``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from airflow_idempotent.lint.scope import Scope, dotted, keywords, last_name

__all__ = ["Collector", "DagDef", "TaskDef", "walk_no_defs"]


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

    @property
    def dag_id(self) -> str | None:
        return self.dag.dag_id if self.dag else None


def _is_dag_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and last_name(dotted(node.func)) == "DAG"


def _decorator_name(node: ast.expr) -> str:
    return dotted(node.func if isinstance(node, ast.Call) else node)


def _task_decorator(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, dict[str, ast.expr]] | None:
    for deco in fn.decorator_list:
        name = _decorator_name(deco)
        if name == "task" or name.startswith("task."):
            return name, keywords(deco) if isinstance(deco, ast.Call) else {}
    return None


def _dag_decorator(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr] | None:
    for deco in fn.decorator_list:
        if last_name(_decorator_name(deco)) == "dag":
            return keywords(deco) if isinstance(deco, ast.Call) else {}
    return None


class Collector:
    """Walk a module and collect its DAGs and their tasks, the way Airflow would attach them."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.dags: list[DagDef] = []
        self.loose: list[TaskDef] = []  # tasks outside any DAG
        self.dag_vars: dict[str, DagDef] = {}
        self.taskflow: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, dict[str, ast.expr]]] = {}
        self.used_ids: dict[tuple[str | None, str], int] = {}

    def collect(self) -> None:
        self._body(self.scope.tree.body, None, "")

    def _new_dag(
        self,
        call_kwargs: dict[str, ast.expr],
        line: int,
        default_id: str,
        node: ast.AST,
        args: list[ast.expr],
    ) -> DagDef:
        dag_id = self.scope.literal(call_kwargs.get("dag_id") or (args[0] if args else None))
        dag = DagDef(
            dag_id=dag_id if isinstance(dag_id, str) else default_id,
            scope=self.scope,
            line=line,
            end_line=getattr(node, "end_lineno", None) or line,
            kwargs=call_kwargs,
            default_args=self.scope.mapping(call_kwargs.get("default_args")),
        )
        self.dags.append(dag)
        return dag

    def _body(self, body: Sequence[ast.stmt], dag: DagDef | None, group: str) -> None:
        for stmt in body:
            self._stmt(stmt, dag, group)

    def _stmt(self, stmt: ast.stmt, dag: DagDef | None, group: str) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            taskflow = _task_decorator(stmt)
            if taskflow is not None:
                self.taskflow[stmt.name] = (stmt, taskflow[0], taskflow[1])
                return
            dag_kwargs = _dag_decorator(stmt)
            if dag_kwargs is not None:
                deco = next(d for d in stmt.decorator_list if last_name(_decorator_name(d)) == "dag")
                inner = self._new_dag(dag_kwargs, stmt.lineno, stmt.name, deco, [])
                saved = dict(self.taskflow)
                self._body(stmt.body, inner, "")
                self.taskflow = saved
            return
        if isinstance(stmt, ast.ClassDef):
            return
        if isinstance(stmt, ast.With | ast.AsyncWith):
            inner_dag, inner_group = dag, group
            for item in stmt.items:
                ctx = item.context_expr
                if _is_dag_call(ctx):
                    assert isinstance(ctx, ast.Call)
                    inner_dag = self._new_dag(
                        keywords(ctx), ctx.lineno, f"<dag at line {ctx.lineno}>", ctx, list(ctx.args)
                    )
                    if isinstance(item.optional_vars, ast.Name):
                        self.dag_vars[item.optional_vars.id] = inner_dag
                elif isinstance(ctx, ast.Call) and last_name(dotted(ctx.func)) == "TaskGroup":
                    gid = self.scope.literal(
                        keywords(ctx).get("group_id") or (ctx.args[0] if ctx.args else None)
                    )
                    if isinstance(gid, str):
                        inner_group = f"{group}{gid}."
                else:
                    self._expr(ctx, dag, group)
            self._body(stmt.body, inner_dag, inner_group)
            return
        if isinstance(stmt, ast.Assign) and _is_dag_call(stmt.value):
            assert isinstance(stmt.value, ast.Call)
            new = self._new_dag(
                keywords(stmt.value),
                stmt.value.lineno,
                f"<dag at line {stmt.lineno}>",
                stmt.value,
                list(stmt.value.args),
            )
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.dag_vars[target.id] = new
            return
        if isinstance(stmt, ast.If | ast.For | ast.While | ast.Try):
            for name in ("test", "iter"):
                if isinstance(getattr(stmt, name, None), ast.expr):
                    self._expr(getattr(stmt, name), dag, group)
            for part in ("body", "orelse", "finalbody"):
                self._body(getattr(stmt, part, []), dag, group)
            for handler in getattr(stmt, "handlers", []):
                self._body(handler.body, dag, group)
            return
        for node in ast.iter_child_nodes(stmt):
            if isinstance(node, ast.expr):
                self._expr(node, dag, group)

    def _expr(self, node: ast.expr, dag: DagDef | None, group: str) -> None:
        for sub in walk_no_defs(node):
            if isinstance(sub, ast.Call):
                self._call(sub, dag, group)

    def _call(self, call: ast.Call, dag: DagDef | None, group: str) -> None:
        kwargs = keywords(call)
        func = call.func
        if "task_id" in kwargs and not _is_dag_call(call):
            operator = dotted(func)
            if isinstance(func, ast.Attribute) and func.attr == "partial":
                operator = dotted(func.value)
            if last_name(operator) == "override":
                return  # fn.override(task_id=...)(...): handled with the call it wraps
            task_id = self.scope.literal(kwargs["task_id"])
            if not isinstance(task_id, str):
                task_id = f"<{ast.unparse(kwargs['task_id'])}>"
            owner = self._owner(kwargs, dag)
            task = TaskDef(
                task_id=group + task_id,
                dag=owner,
                scope=self.scope,
                line=call.lineno,
                end_line=call.end_lineno or call.lineno,
                operator=last_name(operator),
                kwargs=kwargs,
            )
            callable_ = kwargs.get("python_callable")
            if isinstance(callable_, ast.Lambda):
                task.functions.append(callable_)
            elif isinstance(callable_, ast.Name) and callable_.id in self.scope.functions:
                task.functions.append(self.scope.functions[callable_.id])
            self._add(task)
            return
        # TaskFlow: fn(...), fn.override(...)(...), fn.partial(...).expand(...)
        name, overrides = None, {}
        if isinstance(func, ast.Name):
            name = func.id
        elif (
            isinstance(func, ast.Call)
            and isinstance(func.func, ast.Attribute)
            and func.func.attr == "override"
        ):
            name, overrides = dotted(func.func.value), keywords(func)
        elif isinstance(func, ast.Attribute) and func.attr == "partial":
            name = dotted(func.value)
        if name is None or name not in self.taskflow:
            return
        fn, decorator, deco_kwargs = self.taskflow[name]
        merged = {**deco_kwargs, **overrides}
        explicit = self.scope.literal(merged.get("task_id"))
        base = group + (explicit if isinstance(explicit, str) else fn.name)
        owner = self._owner(merged, dag)
        key = (owner.dag_id if owner else None, base)
        count = self.used_ids.get(key, 0)
        self.used_ids[key] = count + 1
        task_id = base if count == 0 else f"{base}__{count}"
        self._add(
            TaskDef(
                task_id=task_id,
                dag=owner,
                scope=self.scope,
                line=call.lineno,
                end_line=call.end_lineno or call.lineno,
                operator=f"@{decorator}",
                kwargs={**merged, **kwargs},
                functions=[fn],
                decorator=decorator,
            )
        )

    def _owner(self, kwargs: dict[str, ast.expr], dag: DagDef | None) -> DagDef | None:
        ref = kwargs.get("dag")
        if isinstance(ref, ast.Name) and ref.id in self.dag_vars:
            return self.dag_vars[ref.id]
        return dag

    def _add(self, task: TaskDef) -> None:
        if task.dag is not None:
            task.dag.tasks.append(task)
        else:
            self.loose.append(task)


def walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk in source order, not entering function, lambda or class bodies."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children = [
            child
            for child in ast.iter_child_nodes(current)
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef)
        ]
        stack.extend(reversed(children))

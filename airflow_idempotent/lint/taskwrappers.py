"""A repository's own task decorator: ``@sqlalchemy_task(conn_id="superset")`` on a function.

Round 32b (issue 35): cern-sis/bi-dags writes every table through a decorator of its own,
``def sqlalchemy_task(conn_id): def decorator(func): @task(..) def populate_database(*args, **kwargs):
session = get_session(conn_id); func(*args, session=session, **kwargs); session.commit() ..; return
populate_database; return decorator``. Calling the decorated function in a DAG adds the inner
``@task``, whose work is the decorated function's body; the linter saw a plain function, so 9 DAGs
had no writing task (a false IDEM005: a DAG with catchup whose only task reads ``context["ds"]``, and
every ORM write missed). A decorator (or a factory of one) defined in the repository whose inner
``@task`` function calls the function it wraps makes the decorated function a task; its keywords are
the inner ``@task``'s, and its task id the inner function's name (what Airflow names it, unless
``functools.wraps`` copies the decorated function's). A decorator that does not call what it wraps,
or an installed one, is not read.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.decorators import decorator_name, task_decorator
from airflow_idempotent.lint.scope import FunctionNode, Scope
from airflow_idempotent.lint.source import is_project_file

__all__ = ["wrapped_task"]


def wrapped_task(fn: FunctionNode, scope: Scope) -> tuple[str, dict[str, ast.expr]] | None:
    """The inner ``@task`` decorator (its name and keywords) a repository decorator of `fn` applies to
    it, `fn` being the code that task runs; None when no decorator of `fn` is such a wrapper."""
    for deco in fn.decorator_list:
        name = decorator_name(deco)
        if not name:
            continue
        module, _, attr = name.rpartition(".")
        found = scope.module_function(module, attr) if module else scope.function(name)
        if found is None or not is_project_file(found[1].source.path):
            continue
        wrapper: FunctionNode | None = found[0]
        if isinstance(deco, ast.Call):  # a factory: ``sqlalchemy_task(conn_id=..)`` returns the decorator
            wrapper = _returned_def(found[0])
        inner = None if wrapper is None else _inner_task(wrapper)
        if inner is not None:
            return inner
    return None


def _returned_def(fn: FunctionNode) -> FunctionNode | None:
    """The function `fn` defines in its body and returns by name; None when it returns no such def."""
    defs = {s.name: s for s in fn.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    returned = {
        s.value.id for s in ast.walk(fn) if isinstance(s, ast.Return) and isinstance(s.value, ast.Name)
    }
    return next((defs[n] for n in defs if n in returned), None)


def _inner_task(decorator: FunctionNode) -> tuple[str, dict[str, ast.expr]] | None:
    """`decorator` takes the function (its first parameter), defines a ``@task`` function that calls
    it and returns that function: the ``@task`` decorator's name and keywords; None otherwise."""
    params = decorator.args.posonlyargs + decorator.args.args
    if not params:
        return None
    wrapped = params[0].arg
    inner = _returned_def(decorator)
    if inner is None:
        return None
    decorated = task_decorator(inner)
    calls_wrapped = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == wrapped
        for n in ast.walk(inner)
    )
    if decorated is None or not calls_wrapped:
        return None
    name, given = decorated
    named = any(decorator_name(d).endswith("wraps") for d in inner.decorator_list)
    # Airflow names the task after the function ``@task`` decorates: the inner one, unless
    # ``functools.wraps`` gave it the wrapped function's name
    return name, given if named or "task_id" in given else {**given, "task_id": ast.Constant(inner.name)}

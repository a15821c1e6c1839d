"""The function a DAG factory call runs, also when the factory is a class (round 27).

Embonor's ``dag = EtlDagFactory().build()`` (the class imported from another module of the
repository, its ``build`` method making ``with DAG(..) as _dag:`` and its tasks): the linter saw no
task, as if the file made no DAG. A method called on an instance made right there
(``Factory(..).build()``) or on a module variable holding one (``factory = Factory(..)``, then
``factory.build()``) is followed like a factory function: its body runs as the DAG file's code.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.dagargs import is_dag_call
from airflow_idempotent.lint.scope import FunctionNode, Scope, method_of
from airflow_idempotent.lint.syntax import dotted


def factory_callee(call: ast.Call, scope: Scope) -> tuple[FunctionNode, Scope] | None:
    """The repository's function (or method) `call` runs; None when it is none the linter can read."""
    found = scope.function(dotted(call.func))
    if found is None and isinstance(call.func, ast.Attribute):
        made, made_scope = scope.value(call.func.value)
        if isinstance(made, ast.Call) and isinstance(made.func, ast.Name):
            found = method_of(made_scope.class_chain(made.func.id), call.func.attr)
    return None if found is None or isinstance(found[0], ast.Lambda) else found


Chain = list[tuple[ast.ClassDef, Scope]]


def method_callee(
    call: ast.Call, scope: Scope, own: Chain | None
) -> tuple[FunctionNode, Scope, Chain] | None:
    """The repository method a call in DAG code runs, with its class chain: ``self.name(..)`` inside a
    method being followed (`own`: its class and bases), or ``Cls(..).name(..)`` / ``obj.name(..)``
    where ``obj = Cls(..)`` (Embonor's task-group classes' ``build()``, which make the tasks)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and func.value.id == "self":
        chain = own or []
    else:
        made, made_scope = scope.value(func.value)
        if not (isinstance(made, ast.Call) and isinstance(made.func, ast.Name)):
            return None
        chain = made_scope.class_chain(made.func.id)
    found = method_of(chain, func.attr) if chain else None
    if found is None or isinstance(found[0], ast.Lambda):
        return None
    return found[0], found[1], chain


def as_called(fn: FunctionNode, call: ast.Call) -> ast.Call:
    """`call` as `fn` receives it: a method called on an object (``obj.build(x)``) gets the object
    first, so ``x`` binds to the parameter after ``self``, not to ``self``."""
    args = fn.args
    first = [*args.posonlyargs, *args.args][:1]
    if not first or first[0].arg not in ("self", "cls") or not isinstance(call.func, ast.Attribute):
        return call
    shifted = ast.Call(func=call.func, args=[ast.Constant(None), *call.args], keywords=call.keywords)
    return ast.copy_location(shifted, call)


def made_dag_id(fn: FunctionNode, scope: Scope, chain: Chain) -> str | None:
    """The id a factory's own ``DAG(..)`` gives (first argument or ``dag_id=``), read where the
    factory is written; ``self.dag_id`` as the class's ``__init__`` sets it (Embonor's factory)."""
    made = next((n for n in ast.walk(fn) if isinstance(n, ast.Call) and is_dag_call(n)), None)
    if made is None:
        return None
    given = next((k.value for k in made.keywords if k.arg == "dag_id"), made.args[0] if made.args else None)
    value = scope.literal(given) if given is not None else None
    return value if isinstance(value, str) else init_text(given, chain)


def init_text(given: ast.expr | None, chain: Chain) -> str | None:
    """``self.name`` as the class's ``__init__`` sets it to a text (one assignment, read in the
    class's module: ``self.dag_id = HIERARCHY_ETL_DAG_ID`` from its config); None otherwise."""
    if not (
        isinstance(given, ast.Attribute) and isinstance(given.value, ast.Name) and given.value.id == "self"
    ):
        return None
    init = method_of(chain, "__init__")
    if init is None:
        return None
    set_to = [
        s.value
        for s in ast.walk(init[0])
        if isinstance(s, ast.Assign)
        and any(isinstance(t, ast.Attribute) and t.attr == given.attr for t in s.targets)
    ]
    value = init[1].literal(set_to[0]) if len(set_to) == 1 else None
    return value if isinstance(value, str) else None

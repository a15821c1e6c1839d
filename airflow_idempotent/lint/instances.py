"""Objects of the repository's own classes: which method a call on one runs, with what bound.

Principle (round 15, from Python's semantics): a task's code is also the methods of the objects it
makes. ``calc = Metric(conn, owner)`` then ``calc.save()`` runs ``Metric.save`` (or a base's), with
``self`` being that object: inside it, ``self.batch_insert(query, rows)`` runs the method of the
object's own class (a subclass's override first), and ``self.cls(..)`` makes an object of whatever
class ``__init__`` stored in ``cls`` from its arguments. So a class chosen at run time (passed as
an argument, kept in an attribute, picked from a dict of classes, returned by a factory) is followed
to the class the task's arguments name, and the SQL its methods send (``cursor.executemany("INSERT
..")``) is the task's. Nothing is guessed: a receiver whose class cannot be read from the code is not
followed. A ``PythonOperator``'s ``op_kwargs`` are its callable's arguments.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.decorators import decorator_kwargs
from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.scope import (
    Bound,
    FunctionNode,
    Row,
    Scope,
    bind_arguments,
    method_of,
    parameters,
)
from airflow_idempotent.lint.templatefiles import path_arguments, templated_arguments

__all__ = ["callable_bindings", "instances", "object_method", "own_method"]

Chain = list[tuple[ast.ClassDef, Scope]]
_MAX_DEPTH = 8


def callable_bindings(task: TaskDef, fn: ast.AST) -> dict[str, Row]:
    """`fn`'s parameters as a task runs it: unknown, but for those its ``op_kwargs`` name and the
    texts its ``op_args`` or TaskFlow call give."""
    names = parameters(fn) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else []
    bound: dict[str, Row] = dict.fromkeys(names, ())
    given = task.scope.mapping(task.kwargs.get("op_kwargs")) if task.kwargs.get("op_kwargs") else {}
    bound.update({k: Bound(v, task.scope) for k, v in given.items() if k in bound})
    bound.update(path_arguments(task, fn))  # ``op_args`` and a TaskFlow call's texts (round 36f)
    bound.update(templated_arguments(task, fn))  # a ``.sql`` file a TaskFlow task's renderer reads
    return bound


def object_method(call: ast.Call, scope: Scope) -> tuple[FunctionNode, Scope] | None:
    """The method ``obj.name(..)`` runs when the class of ``obj`` can be read (an object made here,
    ``self`` of a method entered that way), in a scope with its arguments and ``self`` bound."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    made = _made(func.value, scope, 0)
    if made is None:
        return None
    chain, ctor, ctor_scope = made
    found = method_of(chain, func.attr)
    if found is None or not _own(found[1]):
        return None
    method, def_scope = found
    shifted = ast.Call(func=func, args=[ast.Constant(value=None), *call.args], keywords=call.keywords)
    bound = bind_arguments(method, shifted, scope, def_scope)
    first = parameters(method)[:1]
    bound.update({name: Bound(ctor, ctor_scope) for name in first})  # self: the object made
    return method, def_scope.child(bound)


def _made(node: ast.expr, scope: Scope, depth: int) -> tuple[Chain, ast.Call, Scope] | None:
    """The class chain, constructor call and its scope of the object `node` stands for."""
    if depth > _MAX_DEPTH:
        return None
    value, where = scope.value(node)
    if not isinstance(value, ast.Call):
        return None
    chain = _class_of(value.func, where, depth + 1)
    return (chain, value, where) if chain else None


def _class_of(node: ast.expr, scope: Scope, depth: int) -> Chain:
    """The class (and its bases) `node` names: a class by name (through arguments, loop items and
    dict entries that hold it), or ``self.attr`` that the object's ``__init__`` set from an argument."""
    if depth > _MAX_DEPTH:
        return []
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        made = _made(node.value, scope, depth + 1)
        stored = _init_value(made, node.attr) if made is not None else None
        return _class_of(stored.expr, stored.scope, depth + 1) if stored is not None else []
    value, where = scope.value(node)
    if isinstance(value, ast.Name):
        chain = where.class_chain(value.id)
        return chain if chain and _own(chain[0][1]) else []
    if isinstance(value, ast.Attribute) and value is not node:
        return _class_of(value, where, depth + 1)
    return []


def _init_value(made: tuple[Chain, ast.Call, Scope], attr: str) -> Bound | None:
    """What ``__init__`` stores in ``self.<attr>`` for the object `made`: the expression, read with
    the constructor's arguments bound; None when it is set from no argument or set elsewhere too."""
    chain, ctor, ctor_scope = made
    init = method_of(chain, "__init__")
    if init is None:
        return None
    fn, def_scope = init
    shifted = ast.Call(func=ctor.func, args=[ast.Constant(value=None), *ctor.args], keywords=ctor.keywords)
    inner = def_scope.child(bind_arguments(fn, shifted, ctor_scope, def_scope))
    stored = [
        node.value
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Attribute)
        and isinstance(node.targets[0].value, ast.Name)
        and node.targets[0].value.id == "self"
        and node.targets[0].attr == attr
    ]
    return Bound(stored[0], inner) if len(stored) == 1 else None


def _own(scope: Scope) -> bool:
    parts = scope.source.path.parts
    return "site-packages" not in parts and "dist-packages" not in parts


def instances(fn: ast.AST) -> dict[str, str]:
    """Local names bound to a new object of a named class (``client = STAClient(host)``): its class."""
    out: dict[str, str] = {}
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            out[node.targets[0].id] = node.value.func.id
    return out


def own_method(func: ast.expr, scope: Scope, names: dict[str, str]) -> tuple[FunctionNode, Scope] | None:
    """The method a call ``obj.name(..)`` runs when ``obj`` is an object of one of the repository's
    own classes (``Cls(..).name``, a local bound to ``Cls(..)``, or ``Cls.name`` of a static or class
    method), looked up through the class's bases as Python does (round 35b: ``Pull.run(..)`` running
    ``@classmethod run`` of a base), in a scope with its parameters unknown but a class method's
    ``cls`` bound to the class it is called on, so ``cls(..)`` there makes that class's object
    (`object_method` binds more when it can read the object)."""
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name):
        class_name = owner.func.id
    elif isinstance(owner, ast.Name):
        class_name = names.get(owner.id, owner.id)
    else:
        return None
    found = method_of(scope.class_chain(class_name), func.attr)
    if found is None or not (found[1].source is scope.source or _own(found[1])):
        return None
    method, def_scope = found
    bound: dict[str, Row] = dict.fromkeys(parameters(method), ())
    if decorator_kwargs(method, "classmethod") is not None and method.args.args:
        bound[method.args.args[0].arg] = Bound(ast.Name(id=class_name, ctx=ast.Load()), scope)
    return method, def_scope.child(bound)

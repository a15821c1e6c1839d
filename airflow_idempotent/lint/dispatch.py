"""A custom operator's branches a task never runs: ``if self.mode == "append":`` in ``execute``.

Principle (round 12, from Python's semantics, not from any repository's labels): a custom operator
whose constructor stores an argument (``self.how = mode``) and whose ``execute`` (or a method it
calls) branches on that attribute compared with literals runs, for a task built with a literal
argument (``mode="replace"``), only the branch that value selects. The SQL, clock reads and sends of
the other branches belong to the tasks that select them. An attribute that is not a literal for the
task (a variable, a template, a value the class assigns again outside ``__init__``) decides nothing:
every branch stays, as before.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.scope import Bound, Row, method_of, parameters
from airflow_idempotent.lint.syntax import compared, decided, self_attr

__all__ = ["constructor_values", "dead_nodes", "self_binding"]

#: a literal for a task: its value when the constructor got it, else nothing
Values = dict[str, object]


def constructor_values(task: TaskDef, literal: bool = True) -> Values:
    """The attributes the operator's ``__init__`` stores from a parameter (``self.how = mode`` or
    ``self.mode = mode``) whose value for this task is a literal: the argument given, else the
    parameter's literal default. Attributes assigned anywhere else in the classes are left out.
    Not `literal`: the attributes stored from the parameter of their own name, whatever the value."""
    init = method_of(task.classes, "__init__")
    if init is None or not isinstance(init[0], ast.FunctionDef):
        return {}
    fn = init[0]
    params = set(parameters(fn))
    defaults = _defaults(fn)
    values: Values = {}
    for stmt in ast.walk(fn):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        attr = self_attr(stmt.targets[0])
        if attr is None or not (isinstance(stmt.value, ast.Name) and stmt.value.id in params):
            continue
        if not literal:
            if stmt.value.id == attr:
                values[attr] = None
            continue
        given = task.kwargs.get(stmt.value.id, defaults.get(stmt.value.id))
        if isinstance(given, ast.Constant) and given.value is not ...:
            values[attr] = given.value
    for cls, _ in task.classes:
        for method in cls.body:
            if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method is not fn:
                for node in ast.walk(method):
                    targets = node.targets if isinstance(node, ast.Assign) else []
                    targets += [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
                    for target in targets:
                        values.pop(self_attr(target) or "", None)
    return values


def self_binding(task: TaskDef) -> dict[str, Row]:
    """``self.<name>`` in the custom operator's methods bound to the task's argument of that name, for
    the attributes ``__init__`` stores under their own name (``self.table = table``): round 36k, a
    ``TruncateTableOperator``'s ``f"TRUNCATE TABLE {self.schema}.{self.table}"`` empties the stage
    table its task names, and the COPY after it in the DAG appends to an emptied table. Only an
    attribute's value is read this way (``self`` itself stays unknown: its methods are followed as
    before); an attribute stored any other way, or assigned again outside ``__init__``, stays unknown."""
    stored = set(constructor_values(task, literal=False))
    return {
        f"self.{name}": Bound(task.kwargs[name], task.scope) for name in sorted(stored) if name in task.kwargs
    }


def dead_nodes(fn: ast.AST, values: Values) -> set[int]:
    """The ids of every node of `fn` inside an ``if`` branch the task's `values` never take."""
    dead: set[int] = set()
    if not values:
        return dead
    for node in ast.walk(fn):
        if not isinstance(node, ast.If) or id(node) in dead:
            continue
        truth = _truth(node.test, values)
        skipped = node.body if truth is False else node.orelse if truth is True else []
        dead.update(id(n) for stmt in skipped for n in ast.walk(stmt))
    return dead


def _defaults(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    positional = fn.args.posonlyargs + fn.args.args
    found = {
        a.arg: d
        for a, d in zip(positional[len(positional) - len(fn.args.defaults) :], fn.args.defaults, strict=True)
    }
    found.update(
        {a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is not None}
    )
    return found


def _truth(test: ast.expr, values: Values) -> bool | None:
    """Whether `test` holds for the task's `values`; None when it depends on anything else."""
    return decided(test, lambda part: _leaf_truth(part, values))


def _leaf_truth(test: ast.expr, values: Values) -> bool | None:
    """A test of one ``self`` attribute: its truth, or its comparison with constants."""
    if self_attr(test) in values:  # ``if self.batch_ind:`` (round 18): the literal's truth
        return bool(values[self_attr(test) or ""])
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, right, op = test.left, test.comparators[0], test.ops[0]
    if self_attr(right) in values and isinstance(op, ast.Eq | ast.NotEq | ast.Is | ast.IsNot):
        left, right = right, left
    attr = self_attr(left)
    if attr not in values:
        return None
    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Tuple | ast.List | ast.Set):
        if not all(isinstance(e, ast.Constant) for e in right.elts):
            return None
        return compared(values[attr], op, [e.value for e in right.elts if isinstance(e, ast.Constant)])
    if not isinstance(right, ast.Constant):
        return None
    return compared(values[attr], op, right.value)

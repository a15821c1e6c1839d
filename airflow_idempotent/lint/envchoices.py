"""A DAG argument chosen by the repository's own helper from the values it is handed.

Repositories pick a DAG's settings per environment with a helper of their own,
``schedule_interval=set_env_value(production="@daily", dev="@once")`` whose body is ``return
production if env == "production" else dev``. What such a call gives is one of its arguments, chosen
at parse time by a condition the linter cannot read (a Variable, an environment variable): each
argument is a value the DAG may run with, as each branch of ``"@daily" if prod else None`` is (round
25). Principle (round 35b): a call of a repository function whose every ``return`` gives one of its
parameters, directly or through a conditional expression, stands for the arguments the call binds to
them; anything else the function computes is not followed (no guess at a value).
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.scope import Bound, Scope, bind_arguments, parameters
from airflow_idempotent.lint.source import is_project_file

__all__ = ["choices", "is_none"]


def choices(scope: Scope, node: ast.expr | None) -> list[Bound]:
    """The values `node` may stand for: the arguments a call of a choosing helper binds to what it
    returns, else `node` itself (read in `scope`); [] for no node."""
    if node is None:
        return []
    value, where = scope.value(node)
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return [Bound(node, scope)]
    found = where.function(value.func.id)
    if (
        found is None
        or isinstance(found[0], ast.AsyncFunctionDef)
        or not is_project_file(found[1].source.path)
    ):
        return [Bound(node, scope)]
    fn, def_scope = found
    returned = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return)]
    leaves: list[ast.expr] = []
    for expr in returned:
        leaves.extend(_branches(expr) if expr is not None else [ast.Constant(None)])
    names = set(parameters(fn))
    if not leaves or not all(isinstance(leaf, ast.Name) and leaf.id in names for leaf in leaves):
        return [Bound(node, scope)]
    bound = bind_arguments(fn, value, where, def_scope)
    picked = [bound.get(leaf.id) for leaf in leaves if isinstance(leaf, ast.Name)]
    if not all(isinstance(p, Bound) for p in picked):
        return [Bound(node, scope)]  # a parameter the call leaves unknown: no choice to read
    return [p for p in picked if isinstance(p, Bound)]


def is_none(bound: Bound) -> bool:
    """The value is the literal ``None`` (through names)."""
    value, _ = bound.scope.value(bound.expr)
    return isinstance(value, ast.Constant) and value.value is None


def _branches(expr: ast.expr) -> list[ast.expr]:
    """The expressions a conditional expression may give (nested ones flattened)."""
    if isinstance(expr, ast.IfExp):
        return [*_branches(expr.body), *_branches(expr.orelse)]
    return [expr]

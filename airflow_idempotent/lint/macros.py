"""``user_defined_macros`` that read the clock (round 27).

``DAG(user_defined_macros={"today": datetime.now().strftime("%Y-%m-%d")})`` then ``WHERE day =
'{{ today }}'`` in a task's SQL: the macro is evaluated when the file is parsed (or, a function, when
the template renders), so the task's window is the clock's, as if ``{{ macros.datetime.now() }}``
were written in the template. pass Culture's history tables (round 26) hid the clock this way. The
read is judged where a template uses the macro, like a clock read written there; a macro no template
uses changes nothing.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.definitions import DagDef
from airflow_idempotent.lint.pyfacts import clock_call, clock_use, is_relative, parents
from airflow_idempotent.lint.scope import Scope


def clock_macros(dag: DagDef | None) -> dict[str, tuple[str, bool]]:
    """The DAG's macros whose value reads the clock: name -> (the read as written, shifted by a span)."""
    if dag is None or "user_defined_macros" not in dag.kwargs:
        return {}
    out: dict[str, tuple[str, bool]] = {}
    for name, value in dag.scope.mapping(dag.kwargs["user_defined_macros"]).items():
        found = _clock_of(value, dag.scope)
        if found is not None:
            out[name] = found
    return out


def _clock_of(value: ast.expr, scope: Scope) -> tuple[str, bool] | None:
    if isinstance(value, ast.Name) and (found := scope.function(value.id)) is not None:
        fn, fn_scope = found
        if isinstance(fn, ast.Lambda):
            return _clock_of(fn, fn_scope)
        fn_parents = parents(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and (clock := clock_call(node, fn_scope)) is not None:
                use = clock_use(node, fn, fn_parents)
                if use in ("used", "relative", "stamp"):
                    return f"{value.id}() (which calls {clock})", use == "relative"
        return None
    body = value.body if isinstance(value, ast.Lambda) else value
    holder = ast.Expr(value=body)
    holder_parents = parents(holder)
    for node in ast.walk(body):
        if isinstance(node, ast.Call) and (clock := clock_call(node, scope)) is not None:
            return clock, is_relative(node, holder_parents)
    return None


def in_macros(node: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> bool:
    """`node` is written inside a DAG's ``user_defined_macros=`` (judged where templates use it)."""
    child = parent_of.get(node)
    while child is not None and not isinstance(child, ast.stmt):
        if isinstance(child, ast.keyword) and child.arg == "user_defined_macros":
            return True
        child = parent_of.get(child)
    return False

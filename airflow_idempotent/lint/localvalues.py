"""A function's local assignments, read where the function uses them: the simple locals a task's
code builds its SQL and table names from (`with_locals`), a loop over a text's SQL statements
(`statements_of`), and the value a name reassigned in the function has at one call (`value_at`).
Apart from `scope`, which resolves module-level names."""

from __future__ import annotations

import ast

from airflow_idempotent.lint.scope import Bound, Row, Scope
from airflow_idempotent.lint.syntax import dotted


def with_locals(fn: ast.AST, scope: Scope, dead: set[int]) -> Scope:
    """The function's simple local assignments (``sql = "..."``), so a name passed to ``run`` reads
    (but for those in branches the task never runs: `dead`). Each is read with the ones assigned
    before it, so a local built from another reads too (``table_str = table_name.split(".")[-1]``
    after ``table_name = "ecommdata.sku_sellers"``, smu-chile's to_sql target, round 22)."""
    assigned: dict[str, ast.Assign | ast.For] = {}
    for node in ast.walk(fn):
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.For) and statements_of(node.iter, scope) is not None:
            target = node.target
        if id(node) not in dead and isinstance(target, ast.Name) and isinstance(node, ast.Assign | ast.For):
            name = target.id
            if name not in scope.locals or scope.locals[name] == ():
                assigned[name] = node
    bound: dict[str, Row] = {}
    for name, node in sorted(assigned.items(), key=lambda item: (item[1].lineno, item[1].col_offset)):
        value = node.value if isinstance(node, ast.Assign) else statements_of(node.iter, scope)
        if value is not None:
            bound[name] = Bound(value, scope.child(dict(bound)) if bound else scope)
    return scope.child(bound) if bound else scope


def value_at(fn: ast.AST, arg: ast.expr, call: ast.Call, scope: Scope) -> Scope:
    """The scope to read `arg` of `call` in: a local name assigned more than once in `fn` (``statement
    = "DELETE .."``, ``cur.execute(statement)``, ``statement = "INSERT .."``, ``cur.execute(statement)``)
    has, at each call, the value of the last assignment before it, not the function's last one."""
    if not isinstance(arg, ast.Name):
        return scope
    assigned = [
        node
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == arg.id
    ]
    before = [a for a in assigned if (a.lineno, a.col_offset) < (call.lineno, call.col_offset)]
    if len(assigned) < 2 or not before:
        return scope
    last = max(before, key=lambda a: (a.lineno, a.col_offset))
    return scope.child({arg.id: Bound(last.value, scope)})


def statements_of(node: ast.expr, scope: Scope) -> ast.expr | None:
    """The SQL text a loop runs statement by statement (round 36f): ``for stmt in sql.split(";")``,
    ``sqlparse.split(sql)``, ``[sql]``. Together the statements are the text, so the loop's name
    stands for the whole text (each statement is still read where it is written); None otherwise."""
    if isinstance(node, ast.List | ast.Tuple) and len(node.elts) == 1:
        return node.elts[0]
    if not isinstance(node, ast.Call) or len(node.args) != 1:
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "split" and isinstance(func.value, ast.expr):
        separator = node.args[0]
        if isinstance(separator, ast.Constant) and separator.value == ";":
            return func.value
    if scope.resolve_name(dotted(func) or "") == "sqlparse.split":
        return node.args[0]
    return None

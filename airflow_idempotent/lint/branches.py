"""Which branch of an ``if`` a DAG file takes when its test reads only the row a loop is on.

A loop over literal rows that builds tasks only for some of them (``for row in TABLES: if row[2] ==
'HASH_DELTA' and row[3] == 'ENABLED': PythonOperator(..)``, round 31) makes no task for the other
rows; walking both branches for every row invents tasks, and two invented tasks of one table read
as two writers (IDEM007). Only a test of constants and of locals bound to literal rows is decided:
an environment lookup or a call keeps both branches walked, as before.
"""

from __future__ import annotations

import ast
from typing import Any

from airflow_idempotent.lint.scope import Bound, Scope
from airflow_idempotent.lint.syntax import compared, decided

_UNKNOWN = object()


def _known(node: ast.expr, scope: Scope) -> Any:
    """The constant `node` stands for, or _UNKNOWN: a constant, or a local bound to a literal row
    (a loop variable over literal rows) read whole or by a constant index or key."""
    if isinstance(node, ast.Constant):
        return node.value
    root = node
    while isinstance(root, ast.Subscript):
        root = root.value
    row = scope.locals.get(root.id) if isinstance(root, ast.Name) else None
    if not isinstance(row, Bound) or not isinstance(row.expr, ast.Constant | ast.List | ast.Tuple | ast.Dict):
        return _UNKNOWN
    value, _ = scope.value(node)
    return value.value if isinstance(value, ast.Constant) else _UNKNOWN


def _compare(test: ast.expr, scope: Scope) -> bool | None:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, right = test.ops[0], test.comparators[0]
    left = _known(test.left, scope)
    if left is _UNKNOWN:
        return None
    if isinstance(op, ast.In | ast.NotIn):
        if not isinstance(right, ast.Tuple | ast.List | ast.Set):
            return None
        items = [_known(e, scope) for e in right.elts]
        return None if any(i is _UNKNOWN for i in items) else compared(left, op, items)
    value = _known(right, scope)
    return None if value is _UNKNOWN else compared(left, op, value)


def static_truth(test: ast.expr, scope: Scope) -> bool | None:
    """Whether `test` holds, read from constants and literal rows alone; None when anything else
    decides it (then the caller walks both branches)."""
    return decided(test, lambda part: _compare(part, scope))

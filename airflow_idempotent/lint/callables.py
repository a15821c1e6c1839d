"""A ``python_callable`` imported from another module of the repository (issue 35, lint30).

A DAG file that hands ``PythonOperator`` (or ``BranchPythonOperator``, ``ShortCircuitOperator``,
any operator taking ``python_callable=``) a function of its own repository,
``from sync_clickhouse import extract_load_epoch_data`` or ``from lib import tasks`` then
``tasks.load``, runs that function's body as the task: it is the task's code, read in the module
that defines it (its constants, its helpers), as an imported ``@task`` function already is. A
package ``__init__`` that re-exports the function (``from .load import load``) is followed to the
module that defines it. A function of an installed package (``site-packages``) or of the standard
library is never followed: what it does is the library's, and the linter's catalogue names the
operators and hooks that matter.

Off by default (``--follow-imported-callables``, ``lint_paths(follow_callables=True)``): on the
public repositories it found round 24's one problem and 8 more useful findings, but 91 newly raised
findings were 9 useful, 76 harmless and 6 false (docs/lint-evaluation.md, "Imported callables"), the
harmless ones the existing rules' audit stamps, ops clocks and high-water marks in code now read.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.scope import FunctionNode, Scope
from airflow_idempotent.lint.source import is_project_file

__all__ = ["imported_callable", "task_callable"]


def task_callable(
    scope: Scope, node: ast.expr, follow: bool = False
) -> tuple[FunctionNode | ast.Lambda, Scope] | None:
    """The code a ``python_callable=`` runs and the scope it is read in: a lambda or a function of
    the DAG file (read in the DAG file's scope, as since issue 19), or, when `follow`
    (``--follow-imported-callables``), a function another module of the repository defines (read in
    that module's); None when it cannot be followed."""
    if isinstance(node, ast.Lambda):
        return node, scope
    if isinstance(node, ast.Name) and (own := scope.function(node.id)) and own[1].source is scope.source:
        return own[0], scope
    return imported_callable(scope, node) if follow else None


def imported_callable(scope: Scope, node: ast.expr) -> tuple[FunctionNode, Scope] | None:
    """The function `node` (a ``python_callable=`` argument) names when another module of the
    repository defines it, with that module's scope; None for a function of the DAG file itself
    (collected as before), a name it cannot follow, or an installed package's."""
    if isinstance(node, ast.Name):
        if node.id in scope.functions:
            return None
        found = _through_imports(scope, node.id)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        module = scope.module_named(node.value.id)
        found = None if module is None else _defined(module, node.attr)
    else:
        return None
    if found is None or found[1].source is scope.source or not is_project_file(found[1].source.path):
        return None
    return found


def _through_imports(scope: Scope, name: str) -> tuple[FunctionNode, Scope] | None:
    """Function `name` as imported into `scope` (``from m import name``), following re-exports."""
    found = scope.defining(name)
    if found is None or found[1] not in found[0].functions:  # ``from pkg import mod``: no callable
        return None
    return found[0].functions[found[1]], found[0]


def _defined(module: Scope, name: str) -> tuple[FunctionNode, Scope] | None:
    """Function `name` of `module`: defined there, or imported there from another module (a package
    ``__init__``'s ``from .load import load``)."""
    if name in module.functions:
        return module.functions[name], module
    return _through_imports(module, name)

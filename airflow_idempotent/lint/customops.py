"""A repository's own operator classes: when a task's code is a custom operator's ``execute``."""

from __future__ import annotations

import ast

from airflow_idempotent.lint.scope import Scope, method_of
from airflow_idempotent.lint.source import is_project_file

__all__ = ["operator_classes"]


def operator_classes(scope: Scope, class_name: str) -> list[tuple[ast.ClassDef, Scope]]:
    """The custom operator `class_name` and the repository's classes it derives from, when its
    ``execute`` is the task's code; empty otherwise.

    Principle: a task made by a class of the repository (defined in the DAG file or one of the
    repository's own modules) that derives, directly or through the repository's own classes, from an
    Airflow operator (a base named ``...Operator`` that the repository does not define:
    ``BaseOperator``, ``BaseSensorOperator``, a provider's operator) runs that class's ``execute``:
    its body, and the methods it calls on ``self``, are the task's code, read like a
    ``python_callable``'s. Installed operators are never followed (what they do is the linter's
    catalogue), and a class whose chain writes no ``execute`` adds nothing."""
    chain = scope.class_chain(class_name)
    if not chain or not all(is_project_file(where.source.path) for _, where in chain):
        return []
    own = {cls.name for cls, _ in chain}
    bases = {
        base.id if isinstance(base, ast.Name) else base.attr
        for cls, _ in chain
        for base in cls.bases
        if isinstance(base, ast.Name | ast.Attribute)
    }
    if not any(name.endswith("Operator") for name in bases - own) or method_of(chain, "execute") is None:
        return []
    return chain

"""A DAG call's arguments, dicts unpacked into it included.

``DAG(id, schedule=.., **dag_args)`` takes ``start_date``, ``catchup`` and the rest from the dict
``dag_args``, exactly as if they were written as keywords: a factory that builds its DAGs from a
shared ``dag_args`` (or ``**DEFAULTS``) passes a clock-based ``start_date`` on to every DAG it
builds. A mapping the linter cannot read (a parameter, a loaded config) adds nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Protocol, TypeVar

from airflow_idempotent.lint.scope import Scope

__all__ = ["taking_dag", "unpacked_kwargs"]


def unpacked_kwargs(call: ast.Call, scope: Scope) -> dict[str, ast.expr]:
    """`call`'s keyword arguments by name, with the entries of every ``**mapping`` whose dict the
    scope can read (the written keywords win, as Python would refuse a duplicate anyway)."""
    out: dict[str, ast.expr] = {}
    for kw in call.keywords:
        if kw.arg is None:
            for key, value in scope.mapping(kw.value).items():
                out.setdefault(key, value)
    out.update({kw.arg: kw.value for kw in call.keywords if kw.arg is not None})
    return out


class _Dag(Protocol):
    kwargs: dict[str, ast.expr]


D = TypeVar("D", bound=_Dag)


def taking_dag(node: ast.AST, dags: Sequence[D]) -> D | None:
    """The DAG whose ``start_date``/``end_date`` argument holds `node` (a clock read in a module-level
    ``dag_args = {"start_date": ..}`` that ``DAG(.., **dag_args)`` unpacks): that DAG's own start."""
    for dag in dags:
        for key in ("start_date", "end_date"):
            given = dag.kwargs.get(key)
            if given is not None and any(sub is node for sub in ast.walk(given)):
                return dag
    return None

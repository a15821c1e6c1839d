"""The parameters of a task's callable, and which of them are the run's context names it reads.

Airflow fills a ``python_callable``'s parameters named after the context (``ds``, ``ts``,
``data_interval_start``): such a parameter is how the task takes the run's window. A parameter the
body never reads takes none (round 36b: smu-chile's ``def mongo_to_postgres(ts):``, whose uses of
``ts`` are commented out, loads the whole collection each run: a useful implicit-catchup label that
counting the parameter alone would have made information).
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.facts import RUN_NAMES
from airflow_idempotent.lint.scope import parameters

__all__ = ["callable_params", "run_parameters"]


def callable_params(fn: ast.AST) -> list[str]:
    """The parameter names of a function or lambda (none for anything else)."""
    return parameters(fn) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else []


def run_parameters(fn: ast.AST) -> list[str]:
    """The run's context names among `fn`'s parameters that its body reads, sorted."""
    read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted(set(callable_params(fn)) & RUN_NAMES & read)

"""A module variable that only fills in a hand-run DAG's ``params`` defaults (round 27).

``since = (date.today() - timedelta(days=1)).strftime(..)`` then ``params={"since": Param(since)}`` on
a DAG with ``schedule=None``: the form shows the value when someone triggers the DAG, who sets the
window there; no scheduled run takes it. Round 26 made the same call for a default written inline;
this is its mirror for the spelling with a variable (a scheduled DAG's default stays its window).
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.collect import Collector
from airflow_idempotent.lint.pyfacts import PARAM_CONTEXT, context_of
from airflow_idempotent.lint.schedule import manual_only


def only_manual_params(
    node: ast.AST, body: ast.AST, parent_of: dict[ast.AST, ast.AST], collector: Collector
) -> bool:
    """`node` (a clock read) is the value of a module variable whose every read is in the ``params``
    (or a ``Param`` default) of a DAG of this file that says ``schedule=None`` (a schedule chosen by a
    condition, ``get_airflow_schedule(..) if prod else ..``, may run it: still judged)."""
    stmt = node
    while stmt in parent_of and not isinstance(stmt, ast.stmt):
        stmt = parent_of[stmt]
    if not isinstance(stmt, ast.Assign) or parent_of.get(stmt) is not body:
        return False
    names = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    if not names or len(names) != len(stmt.targets):
        return False
    reads = [
        n for n in ast.walk(body) if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
    ]
    if not reads:
        return False
    for read in reads:
        dag = next((d for d in collector.dags if d.line <= read.lineno <= d.end_line), None)
        if dag is None or context_of(read, parent_of) != PARAM_CONTEXT or not manual_only(dag):
            return False
    return True

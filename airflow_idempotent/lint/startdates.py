"""A DAG's ``start_date`` computed by a function of the repository that reads the clock.

``start_date=get_days_ago_start_date(..)`` moves with the clock as ``days_ago(..)`` does (IDEM003),
though no clock call is written in the DAG's arguments: the helper's body is read for one.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.collect import Collector
from airflow_idempotent.lint.definitions import DagDef
from airflow_idempotent.lint.factorycalls import factory_callee
from airflow_idempotent.lint.findings import Recorder
from airflow_idempotent.lint.pyfacts import clock_call
from airflow_idempotent.lint.schedule import clock_start_read
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.syntax import dotted

__all__ = ["check_start_date_helpers", "start_date_taker"]


def check_start_date_helpers(recorder: Recorder, collector: Collector) -> None:
    """A ``start_date`` computed by a function of the repository that reads the clock
    (``start_date=get_days_ago_start_date(..)``): IDEM003 as a clock-based start_date, information
    when the DAG's start creates no windows (`Recorder.clock_read`)."""
    for dag in collector.dags:
        node = dag.kwargs.get("start_date") or dag.default_args.get("start_date")
        if (factory := _factory_start(dag)) is not None:
            place = (dag.file, dag.line)  # the factory's call: the factory's own line serves every DAG
            recorder.clock_read(
                dag, factory[0], place, (place,), "its DAG factory's arguments", False, start_date=True
            )
            continue
        if not isinstance(node, ast.Call) or clock_call(node, dag.scope) is not None:
            continue
        name = dotted(node.func)
        found = dag.scope.function(name) if name else None
        if found is None or isinstance(found[0], ast.Lambda):
            continue
        fn, fn_scope = found
        clocks = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and clock_call(c, fn_scope)]
        if not clocks:
            continue
        inner = clock_call(clocks[0], fn_scope)
        recorder.clock_read(
            dag,
            f"{name}() (which calls {inner})",
            (dag.file, node.lineno),
            ((dag.file, dag.line),),
            "the DAG's arguments",
            False,
            start_date=True,
        )


def _factory_start(dag: DagDef) -> tuple[str, Scope, ast.Call] | None:
    """The clock call a DAG built by a factory of the repository starts at, written inside the
    factory's function (``'start_date': pendulum.today(tz='UTC')`` in its ``default_dag_args``, round
    41's solana-etl-airflow): the module-level reading of starts (`codechecks`) never walks a
    function's body, so such a start was read by nobody. Reported at the factory's call."""
    found = clock_start_read(dag)
    if found is None or not dag.inherited:
        return None
    for call in ast.walk(dag.scope.tree):
        if isinstance(call, ast.Call) and call.lineno == dag.line:
            factory = factory_callee(call, dag.scope)
            if factory is not None and any(n is found[2] for n in ast.walk(factory[0])):
                return found
    return None


def start_date_taker(
    node: ast.AST, parents_of: dict[ast.AST, ast.AST], collector: Collector
) -> DagDef | None:
    """The DAG whose ``start_date`` (or ``end_date``) a module variable holding this clock read is,
    when every use of the variable is such an argument or ``default_args`` entry (round 31:
    ``START_DATE_LOCAL = pendulum.now(tz).replace(hour=0).subtract(days=1)``, given only as
    ``start_date=``): a start date that moves with the clock (IDEM003's), no window a task reads. None
    when the variable is used anywhere else (a window, a file name) or no DAG takes it."""
    stmt = node
    while stmt in parents_of and not isinstance(stmt, ast.stmt):
        stmt = parents_of[stmt]
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
    if not isinstance(target, ast.Name):
        return None
    name, top = target.id, stmt
    while top in parents_of:
        top = parents_of[top]
    uses = [n for n in ast.walk(top) if isinstance(n, ast.Name) and n.id == name]
    uses = [n for n in uses if isinstance(n.ctx, ast.Load)]
    if not uses or not all(_date_slot(n, parents_of) for n in uses):
        return None
    for dag in collector.dags:
        for key in _DATE_KEYS:
            given = dag.kwargs.get(key) or dag.default_args.get(key)
            if isinstance(given, ast.Name) and given.id == name:
                return dag
    return None


_DATE_KEYS = ("start_date", "end_date")


def _date_slot(name: ast.Name, parents_of: dict[ast.AST, ast.AST]) -> bool:
    """`name` is given as a ``start_date=``/``end_date=`` keyword or such a dict entry."""
    parent = parents_of.get(name)
    if isinstance(parent, ast.keyword):
        return parent.arg in _DATE_KEYS
    if isinstance(parent, ast.Dict) and name in parent.values:
        key = parent.keys[parent.values.index(name)]
        return isinstance(key, ast.Constant) and key.value in _DATE_KEYS
    return False

"""A DAG's ``start_date`` computed by a function of the repository that reads the clock.

``start_date=get_days_ago_start_date(..)`` moves with the clock as ``days_ago(..)`` does (IDEM003),
though no clock call is written in the DAG's arguments: the helper's body is read for one.
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.collect import Collector
from airflow_idempotent.lint.findings import Recorder
from airflow_idempotent.lint.pyfacts import clock_call
from airflow_idempotent.lint.syntax import dotted

__all__ = ["check_start_date_helpers"]


def check_start_date_helpers(recorder: Recorder, collector: Collector) -> None:
    """A ``start_date`` computed by a function of the repository that reads the clock
    (``start_date=get_days_ago_start_date(..)``): IDEM003 as a clock-based start_date, information
    when the DAG's start creates no windows (`Recorder.clock_read`)."""
    for dag in collector.dags:
        node = dag.kwargs.get("start_date") or dag.default_args.get("start_date")
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

"""A window from the last successful run (``prev_start_date_success``...): state, not the run (IDEM004).

Airflow's context names ``prev_start_date_success``, ``prev_data_interval_start_success``,
``prev_data_interval_end_success`` and ``prev_execution_date_success`` carry the previous
*successful* run of the DAG, whatever run is running: "everything since the last success". A first
run, a rerun after a later success or a backfill of an earlier window gets another span than the
run's own interval (a rerun of yesterday's run reads from today's success on), and with the
wall-clock ``prev_start_date_success`` rows that land late are never loaded. Like a watermark
(`watermarks`) it is state a run leaves behind; the finding is the reading task's, at the read.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from airflow_idempotent.lint.facts import WindowRef
from airflow_idempotent.lint.findings import TaskCheck
from airflow_idempotent.lint.scope import parameters

__all__ = ["SUCCESS_NAMES", "check_last_success", "success_reads"]

#: the context names that carry the last successful run's dates
SUCCESS_NAMES = frozenset(
    {
        "prev_start_date_success",
        "prev_data_interval_start_success",
        "prev_data_interval_end_success",
        "prev_execution_date_success",
    }
)


def success_reads(node: ast.AST) -> Iterator[tuple[str, int]]:
    """(name, line) of every read of a last-success name in `node`: a function's parameter, a
    subscript (``context["prev_start_date_success"]``), a ``.get("..")`` of the context, a bare name
    or attribute (a Jinja expression's ``{{ prev_data_interval_end_success }}``)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        for param in parameters(node):
            if param in SUCCESS_NAMES:
                yield param, node.lineno
    for sub in ast.walk(node):
        key: object = None
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant):
            key = sub.slice.value
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == "get"
            and sub.args
            and isinstance(sub.args[0], ast.Constant)
        ):
            key = sub.args[0].value
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            key = sub.id
        elif isinstance(sub, ast.Attribute):
            key = sub.attr
        if isinstance(key, str) and key in SUCCESS_NAMES:
            yield key, getattr(sub, "lineno", 0)


def check_last_success(check: TaskCheck, node: ast.AST, file: str, where: str, line: int = 0) -> bool:
    """IDEM004 when `node` (a function the task runs, a template's expression) takes a date of the
    last successful run; `line` places a template's read (its expression has no file lines)."""
    reads = sorted(set(success_reads(node)), key=lambda r: r[1])
    if not reads:
        return False
    name, at = reads[0]
    check.facts.windows.append(WindowRef("target", f"The last success: {name} in {where}."))
    check.add(
        "IDEM004",
        file,
        line or at,
        f"the window starts at {name} in {where}: the last successful run's, not this run's interval; "
        "a rerun or backfill of an earlier window reads from a later success on (or from the first "
        "run's fallback), and rows that land behind it are never loaded",
        cause="window",
    )
    return True

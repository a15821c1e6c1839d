"""The run's context, as Airflow would hand it to ``execute()``: dates, params, ``ti`` and ``dag_run``.

Built from a window (`airflow_idempotent.window.Window`), so the tasks see it as logical date and
data interval: what the idempotency harness runs its attempts with and the rerun preview renders a
task's templates with (`airflow_idempotent.preview`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_idempotent.window import Window

__all__ = ["run_context"]


class _DagRun:
    def __init__(self, dag_id: str, run_id: str, logical_date: Any, conf: Mapping[str, Any]) -> None:
        self.dag_id = dag_id
        self.run_id = run_id
        self.logical_date = logical_date
        self.conf = dict(conf)
        self.run_type = "manual"


class _TaskInstance:
    """What task code and templates read from `ti`: identity and XComs of this attempt's run."""

    def __init__(
        self, dag_id: str, task_id: str, run_id: str, try_number: int, xcoms: dict[str, Any]
    ) -> None:
        self.dag_id = dag_id
        self.task_id = task_id
        self.run_id = run_id
        self.try_number = try_number
        self.map_index = -1
        self.xcoms = xcoms

    def xcom_pull(
        self, task_ids: Any = None, key: str = "return_value", default: Any = None, **_: Any
    ) -> Any:
        if key != "return_value":
            return default
        if isinstance(task_ids, str):
            return self.xcoms.get(task_ids, default)
        if task_ids is None:
            return default
        return [self.xcoms.get(t, default) for t in task_ids]

    def xcom_push(self, key: str, value: Any, **_: Any) -> None:
        if key == "return_value":
            self.xcoms[self.task_id] = value


def _params(task: Any) -> dict[str, Any]:
    """The DAG's params, then the task's."""
    params: dict[str, Any] = {}
    dag = task.dag if task.has_dag() else None
    for source in (getattr(dag, "params", None), getattr(task, "params", None)):
        if source is None:
            continue
        with contextlib.suppress(Exception):
            for name in source:
                params[name] = source[name]
    return params


def run_context(
    task: Any,
    window: Window,
    run_id: str,
    try_number: int,
    xcoms: dict[str, Any],
    params: Mapping[str, Any],
    conf: Mapping[str, Any],
) -> dict[str, Any]:
    """The context of one attempt of `task` for `window`: what its templates and code read."""
    start, end = window.start, window.end
    dag = task.dag if task.has_dag() else None
    dag_id = dag.dag_id if dag is not None else "adhoc"
    ti = _TaskInstance(dag_id, task.task_id, run_id, try_number, xcoms)
    context: dict[str, Any] = {
        "logical_date": start,
        "data_interval_start": start,
        "data_interval_end": end,
        "ds": start.strftime("%Y-%m-%d"),
        "ds_nodash": start.strftime("%Y%m%d"),
        "ts": start.isoformat(),
        "ts_nodash": start.strftime("%Y%m%dT%H%M%S"),
        "run_id": run_id,
        "params": {**_params(task), **params, **conf},
        "dag_run": _DagRun(dag_id, run_id, start, conf),
        "ti": ti,
        "task_instance": ti,
        "task": task,
        "dag": dag,
        "conf": None,
        "inlets": [],
        "outlets": list(getattr(task, "outlets", []) or []),
    }
    with contextlib.suppress(ImportError):
        from airflow.sdk.execution_time import macros

        context["macros"] = macros
    return context

"""Rerun preview: what rerunning a window would change, task by task, before anything runs.

- `diff`: `preview_write`, one window-write task's rows staged, diffed with production by key
  (the guard's diff), sampled and dropped, in a transaction that is always rolled back;
- `rerun`: `preview_rerun`, every task of a DAG (window writes, effects, plain tasks through
  the linter) with a verdict each, after `rerun_conf` judged the conf; `load_dag` parses the
  DAG with Airflow's DagBag.
"""

from airflow_idempotent.preview.diff import WritePreview, preview_write
from airflow_idempotent.preview.rerun import (
    NOT_SAFE,
    SAFE,
    UNVERIFIED,
    ConfRefusal,
    RerunPreview,
    TaskPreview,
    load_dag,
    preview_rerun,
    rerun_conf,
)

__all__ = [
    "NOT_SAFE",
    "SAFE",
    "UNVERIFIED",
    "ConfRefusal",
    "RerunPreview",
    "TaskPreview",
    "WritePreview",
    "load_dag",
    "preview_rerun",
    "preview_write",
    "rerun_conf",
]

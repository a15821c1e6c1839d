"""Loading a DAG file for the harness, which runs the user's code: importing the file is expected here
(unlike the linter, which never imports a DAG file)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from airflow_idempotent.testing.errors import HarnessError

__all__ = ["load_dag"]


def load_dag(path: str | os.PathLike[str], dag_id: str | None = None) -> Any:
    """Import a DAG file and return its DAG `dag_id` (or its only DAG)."""
    from airflow.sdk import DAG
    from airflow.sdk.definitions._internal.contextmanager import DagContext

    file = Path(path).resolve()
    if not file.is_file():
        raise HarnessError(f"no DAG file at {file}")
    name = f"idempotency_dag_{hashlib.sha1(str(file).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise HarnessError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    previous = DagContext.current_autoregister_module_name
    DagContext.current_autoregister_module_name = name
    try:
        spec.loader.exec_module(module)
    finally:
        DagContext.current_autoregister_module_name = previous
    dags: dict[str, Any] = {}
    for dag, mod in list(DagContext.autoregistered_dags):
        if mod is module:
            dags[dag.dag_id] = dag
    for value in vars(module).values():
        if isinstance(value, DAG):
            dags[value.dag_id] = value
    if dag_id is not None:
        if dag_id not in dags:
            raise HarnessError(f"{file} has no DAG {dag_id!r}: it has {', '.join(sorted(dags)) or 'none'}")
        return dags[dag_id]
    if len(dags) != 1:
        raise HarnessError(f"{file} has {len(dags)} DAGs ({', '.join(sorted(dags))}): pass dag_id=...")
    return next(iter(dags.values()))

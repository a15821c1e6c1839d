"""Import this package's operators once in the Airflow processes that fork tasks and DAG parsers.

LocalExecutor's workers are forked from the scheduler when it starts, and each task process is
forked from a worker; the DAG processor forks a child for every parse of a DAG file. A DAG of this
package imports its operators (SQLAlchemy models of the history store, the common SQL provider,
sqlglot's dialects) in each of those children afresh: 57% of a guarded task's CPU in the guarded
month's end-to-end test. Imported once in the parent before it forks, every child inherits them.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger(__name__)


def preload_for_forks(component: Any) -> None:
    """Import the operators (the guard, the history store, the warehouse hook come with them) when
    `component` is an Airflow job: a scheduler, DAG processor or triggerer.

    Airflow's listeners get `on_starting` from a job before it starts its executor or parsers,
    and from every task process too (the task runner's marker): a task imports only what its DAG
    needs, so it is left alone. A failed import is logged, never raised (the task imports again).
    """
    job = getattr(sys.modules.get("airflow.jobs.job"), "Job", None)
    if job is None or not isinstance(component, job):
        return
    try:
        import airflow_idempotent.operators  # noqa: F401 - imported for the forked children
    except Exception as err:
        log.warning("operators not preloaded (%s: %s)", type(err).__name__, err)

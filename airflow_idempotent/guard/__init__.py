"""The backfill guard: what a guarded DAG declares, what a backfill must declare, and the checks.

- `config`: `GuardConfig` (the DAG's declaration, incl. how its operators read a window) and
  `Thresholds`;
- `intent`: `BackfillIntent`, the one model of a backfill's conf;
- `scope`: a backfill's windows, its cap and which windows have closed;
- `backfills`: the decision on an Airflow backfill request (the API server's middleware, the UI);
- `diff` and `write`: a window staged, diffed against production and swapped within the limits;
- `killswitch`: the flag that stops every remaining guarded write;
- `enforce`: the one enforcement point, where Airflow's ORM creates a backfill (imported by the
  `airflow.policy` module's listener only: it imports Airflow's models);
- `sizes`: a backfill run's recorded size, checked by every guarded task before it writes.
"""

from airflow_idempotent.guard import sizes
from airflow_idempotent.guard.backfills import evaluate_backfill_request, guard_of
from airflow_idempotent.guard.config import DEFAULT_CAP, GUARD_PARAM, GuardConfig, Thresholds
from airflow_idempotent.guard.diff import WindowDiff
from airflow_idempotent.guard.errors import GuardRefusal
from airflow_idempotent.guard.intent import CONF_KEYS, SEMANTICS, BackfillIntent
from airflow_idempotent.guard.results import GuardBreach, GuardedResult
from airflow_idempotent.guard.scope import backfill_windows, check_scope, check_window_closed, is_open
from airflow_idempotent.guard.write import guarded_write

__all__ = [
    "CONF_KEYS",
    "DEFAULT_CAP",
    "GUARD_PARAM",
    "SEMANTICS",
    "BackfillIntent",
    "GuardBreach",
    "GuardConfig",
    "GuardRefusal",
    "GuardedResult",
    "Thresholds",
    "WindowDiff",
    "backfill_windows",
    "check_scope",
    "check_window_closed",
    "evaluate_backfill_request",
    "guard_of",
    "guarded_write",
    "is_open",
    "sizes",
]

"""Run history: every DAG run, task attempt and window write, in a store of our own."""

from airflow_idempotent.history.spool import SafeHistory, Spool
from airflow_idempotent.history.store import (
    AttemptRecord,
    DagRunRecord,
    HistoryStore,
    StoredWrite,
    WriteRecord,
)

__all__ = [
    "AttemptRecord",
    "DagRunRecord",
    "HistoryStore",
    "SafeHistory",
    "Spool",
    "StoredWrite",
    "WriteRecord",
]

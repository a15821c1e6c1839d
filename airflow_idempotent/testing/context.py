"""The run's context for the harness: `airflow_idempotent.context.run_context` (its one home, shared
with the rerun preview, which must not depend on this testing package)."""

from airflow_idempotent.context import run_context

__all__ = ["run_context"]

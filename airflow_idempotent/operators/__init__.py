"""Window-true write operators."""

from airflow_idempotent.operators.base import WindowWriteOperator
from airflow_idempotent.operators.merge import MergeOperator
from airflow_idempotent.operators.overwrite import PartitionOverwriteOperator

__all__ = ["MergeOperator", "PartitionOverwriteOperator", "WindowWriteOperator"]

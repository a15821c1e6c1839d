"""PartitionOverwriteOperator: delete the window and insert it again, in one transaction."""

from __future__ import annotations

from typing import Any

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.operators.base import WindowWriteOperator
from airflow_idempotent.strategies import overwrite
from airflow_idempotent.write_spec import PeriodResult, WriteResult, WriteSpec


class PartitionOverwriteOperator(WindowWriteOperator):
    """Replace the run's window of `table` with the SELECT's rows.

    In one transaction under the (table, window) lock: delete the window's rows, insert the
    SELECT's rows, and roll back if any produced row falls outside the window. A rerun after
    any crash leaves the table as one clean run would (on Spark: one Delta or Iceberg commit, or a
    parquet table's partition switch). Returns (XCom) rows deleted and inserted.
    """

    strategy = "overwrite"

    def __init__(self, *, partition_column: str, **kwargs: Any) -> None:
        super().__init__(partition_column=partition_column, **kwargs)

    def period_counts(self, period: PeriodResult) -> dict[str, Any]:
        """An overwritten period lost the rows it had and holds the ones inserted."""
        return {"rows_deleted": period.rows_before, "rows_inserted": period.row_count, "rows_updated": 0}

    def write(self, adapter: EngineAdapter, spec: WriteSpec) -> WriteResult:
        if not adapter.supports_transactions:  # Spark: by table format (Delta commit, parquet switch)
            from airflow_idempotent.spark import writes

            target = f"{self.conn_id}:{self.table}"
            return writes.overwrite(adapter, spec, self.history_conn_id, target)  # type: ignore[arg-type]
        return overwrite(adapter, spec)

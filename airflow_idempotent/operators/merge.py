"""MergeOperator: upsert the window's rows on a key in the database's native form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.hooks.warehouse import WarehouseHook
from airflow_idempotent.operators.base import WindowWriteOperator
from airflow_idempotent.strategies import merge
from airflow_idempotent.write_spec import PeriodResult, WriteResult, WriteSpec

if TYPE_CHECKING:
    from airflow.sdk import Context


class MergeOperator(WindowWriteOperator):
    """Upsert the SELECT's rows into `table` on `key_columns`.

    ON CONFLICT on PostgreSQL, SQLite and DuckDB; ON DUPLICATE KEY UPDATE on MariaDB/MySQL; one
    MERGE INTO commit on a Delta or Iceberg table through Spark Connect (parquet tables are refused).
    A source with duplicate or NULL keys (or, with a partition_column, rows outside the window)
    is refused before anything is written, naming the offending keys. With
    `delete_missing=True` the window's rows whose key the source no longer has are deleted
    in the same transaction.
    """

    strategy = "merge"

    def __init__(self, *, key_columns: Sequence[str], delete_missing: bool = False, **kwargs: Any) -> None:
        super().__init__(key_columns=key_columns, **kwargs)
        if not self.key_columns:
            raise ValueError("MergeOperator needs key_columns, e.g. key_columns=['sale_id'].")
        self.delete_missing = delete_missing

    def execute(self, context: Context) -> dict[str, Any]:
        """Refuse an engine that cannot merge before anything runs (the lint, the kill switch, a query).

        Only the connection's record is read here (no session or database connection is opened).
        """
        adapter = WarehouseHook(conn_id=self.conn_id).adapter
        adapter.check_merge_supported(self.table)
        return self.execute_with(context, adapter)

    def strategy_parts(self) -> dict[str, Any]:
        return {"key_columns": self.key_columns, "delete_missing": self.delete_missing}

    def period_counts(self, period: PeriodResult) -> dict[str, Any]:
        """An upsert only adds or updates rows, so a period's growth is what it inserted; with
        delete_missing some rows also went, and the split is not known per period."""
        if self.delete_missing or period.rows_before is None or period.row_count is None:
            return {}
        return {"rows_inserted": period.row_count - period.rows_before}

    def write(self, adapter: EngineAdapter, spec: WriteSpec) -> WriteResult:
        if not adapter.supports_transactions:  # Spark: MERGE INTO on a Delta table, parquet refused
            from airflow_idempotent.spark import writes

            return writes.merge(adapter, spec, self.key_columns, self.delete_missing)  # type: ignore[arg-type]
        return merge(adapter, spec, self.key_columns, self.delete_missing)

"""The shared base of the window-true write operators."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from airflow.sdk import BaseOperator

from airflow_idempotent.adapters.base import EngineAdapter, split_table_name, validate_identifier
from airflow_idempotent.hooks.warehouse import WarehouseHook
from airflow_idempotent.lint import check_deterministic
from airflow_idempotent.strategies import WriteResult, WriteSpec
from airflow_idempotent.window import Window, parse_granularity, window_from_context

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context


class WindowWriteOperator(BaseOperator):
    """Write the rows of a SELECT into `table` for the run's window, safely rerunnable.

    The window comes from the run (data interval, or the logical date plus a declared
    granularity, or the partition key), never from the clock. It is bound into the SELECT as
    `:window_start` / `:window_end` and offered to templates as `{{ window_start }}`,
    `{{ window_end }}` and `{{ window }}`. SQL reading the clock or randomness is refused
    before it runs unless the function is listed in `allow_functions`.

    :param table: target table, `table` or `schema.table` (validated, quoted).
    :param sql: a SELECT (or WITH .. SELECT) producing the rows, or a `.sql` file; templated.
    :param conn_id: Airflow connection of the database (PostgreSQL, MariaDB/MySQL, SQLite, DuckDB).
    :param partition_column: DATE or TIMESTAMP column of `table` that the window selects.
    :param parameters: extra bound parameters for the SELECT; templated, e.g.
        {"policy_version": "{{ params.policy_version }}"}.
    :param granularity: "hour", "day", "week", "month", "year" or a timedelta: the window of a run
        whose data interval has no width (the default cron timetable) or of a partitioned run.
    :param timezone: the zone the window's days are read in (default UTC).
    :param anchor: "start": the period that contains the logical date; "end": the period that ends at it.
    :param allow_functions: clock or random functions let through the determinism lint, logged.
    :param lock_timeout: seconds to wait for another attempt on the same (table, window).
    """

    template_fields: Sequence[str] = ("sql", "parameters")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {"sql": "sql", "parameters": "json"}
    ui_color = "#d9f2e6"
    strategy = "write"

    def __init__(
        self,
        *,
        table: str,
        sql: str,
        conn_id: str = "warehouse",
        partition_column: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        granularity: str | datetime.timedelta | None = None,
        timezone: str = "UTC",
        anchor: Literal["start", "end"] = "start",
        allow_functions: Iterable[str] = (),
        lock_timeout: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        split_table_name(table)
        if partition_column is not None:
            validate_identifier(partition_column, "partition_column")
        parse_granularity(granularity)
        self.table = table
        self.sql = sql
        self.conn_id = conn_id
        self.partition_column = partition_column
        self.parameters = dict(parameters or {})
        self.granularity = granularity
        self.timezone = timezone
        self.anchor = anchor
        self.allow_functions = tuple(allow_functions)
        self.lock_timeout = float(lock_timeout)

    def window(self, context: Context | Mapping[str, Any]) -> Window:
        """The run's window: the one place it is derived (see airflow_idempotent.window)."""
        return window_from_context(context, self.granularity, self.timezone, self.anchor)

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        """Offer the window to templates before they render."""
        context.update(self.window(context).template_vars())  # type: ignore[typeddict-item]
        super().render_template_fields(context, jinja_env)

    def execute(self, context: Context) -> dict[str, Any]:
        window = self.window(context)
        hook = WarehouseHook(conn_id=self.conn_id)
        adapter = hook.adapter
        query = check_deterministic(self.sql, adapter.dialect, self.allow_functions)
        spec = WriteSpec(
            table=self.table,
            query=query,
            window=window,
            partition_column=self.partition_column,
            params=self.parameters,
            lock_timeout=self.lock_timeout,
        )
        result = self.write(adapter, spec)
        self.log.info(
            "%s of %s for window %s: %d deleted, %d inserted, %d updated",
            result.strategy,
            result.table,
            result.window,
            result.rows_deleted,
            result.rows_inserted,
            result.rows_updated,
        )
        return result.as_dict()

    def write(self, adapter: EngineAdapter, spec: WriteSpec) -> WriteResult:
        raise NotImplementedError

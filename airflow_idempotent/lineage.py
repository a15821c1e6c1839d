"""OpenLineage for the window-write operators: which tables a run read, which window of which table it wrote.

Airflow's OpenLineage provider (the optional extra ``openlineage``) asks each operator for its lineage
through ``get_openlineage_facets_on_complete`` / ``_on_failure``; the operators delegate here. The
input tables come from the operator's SELECT parsed with sqlglot in the connection's dialect (the
same parse the determinism lint does), the datasets are named as the provider names them for the
connection's database (its hook's ``get_openlineage_database_info`` where the hook has one, the
OpenLineage naming spec otherwise), and the run carries:

- ``nominalTime``: the window, start inclusive, end exclusive. The provider replaces it with the
  DAG run's data interval when the run has one (a cron ``@daily`` run's interval has no width),
  so the window is also in the custom facet below;
- on the output: ``outputStatistics`` (the window's rows after the write), ``subset`` (the
  partition written) and ``version`` (the dataset version history gave the write);
- ``airflowIdempotent_window``: strategy, window, partition key, ordinal, dataset version, checksum,
  fingerprint, policy version, semantics and, for a guarded write, the diff's row counts.

Nothing else of the run is reported: no conf values besides the declared semantics, no sample keys,
no measure totals. This module imports the provider; import it only where the provider is installed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs
from airflow.providers.common.sql.hooks.sql import DbApiHook
from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.providers.openlineage.sqlparser import DatabaseInfo, SQLParser
from openlineage.client.event_v2 import Dataset, InputDataset, OutputDataset
from openlineage.client.facet_v2 import (
    RunFacet,
    dataset_version_dataset,
    nominal_time_run,
    output_statistics_output_dataset,
    sql_job,
)
from openlineage.client.generated.base_subset_dataset import (
    OutputSubsetOutputDatasetFacet,
    Partition,
    PartitionSubsetCondition,
)
from sqlglot import exp

from airflow_idempotent.adapters.identifiers import table_parts
from airflow_idempotent.window import Window, spanning

log = logging.getLogger(__name__)

#: The custom run facet's key (OpenLineage: a custom facet is prefixed by its producer).
WINDOW_FACET = "airflowIdempotent_window"
_SCHEMA_URL = "https://github.com/airflow-idempotent/airflow-idempotent/blob/main/docs/lineage.md"
#: The schema a table without one lives in, per connection type (PostgreSQL asks the database).
DEFAULT_SCHEMAS = {"sqlite": "main", "duckdb": "main", "postgres": "public"}
#: File databases: the namespace is the file (`sqlite:///data/warehouse.db`).
EMBEDDED = frozenset({"sqlite", "duckdb"})
#: The diff figures reported: counts only, never sample keys or measure totals.
DIFF_COUNTS = ("rows_before", "rows_after", "added", "removed", "changed", "unchanged")


@attrs.define
class WindowRunFacet(RunFacet):
    """``airflowIdempotent_window``: the window a run wrote and what history made of the write."""

    strategy: str
    window: str
    windowStart: str  # OpenLineage facets are camelCase
    windowEnd: str
    partitionKey: str | None = None
    ordinal: int | None = None
    datasetVersion: int | None = None
    checksum: str | None = None
    fingerprint: str | None = None
    policyVersion: str | None = None
    semantics: str | None = None
    skipped: bool = False
    rowsDeleted: int | None = None
    rowsInserted: int | None = None
    rowsUpdated: int | None = None
    diff: dict[str, int] | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{_SCHEMA_URL}#WindowRunFacet"


@attrs.frozen
class Naming:
    """How the provider names datasets of one connection: namespace, database, default schema."""

    info: DatabaseInfo
    default_schema: str | None

    @property
    def namespace(self) -> str:
        return SQLParser.create_namespace(self.info)

    def dataset(self, schema: str | None, table: str, database: str | None = None) -> Dataset:
        """The dataset of a table as the provider's parser names it: `database.schema.table`,
        each part normalised, the connection's database and default schema filling what is missing."""
        norm = self.info.normalize_name_method
        parts = (database or self.info.database, schema or self.default_schema, table)
        name = ".".join(norm(p) for p in parts if p)
        return Dataset(namespace=self.namespace, name=name.upper() if self.info.is_uppercase_names else name)


def naming(conn: Any) -> Naming:
    """The provider's naming for an Airflow connection: its own hook's database info where it has
    one (PostgreSQL), else the OpenLineage naming spec (`mysql://host:port`, `sqlite:///path`)."""
    conn_type = (conn.conn_type or "").lower()
    hook: Any = None
    try:
        hook = conn.get_hook()
    except Exception as err:  # no provider for the type (MySQL without its provider, DuckDB)
        log.debug("no provider hook for %s connections: %s", conn_type, err)
    info = getter(conn) if callable(getter := getattr(hook, "get_openlineage_database_info", None)) else None
    if isinstance(info, DatabaseInfo):
        try:
            schema = hook.get_openlineage_default_schema()
        except Exception as err:
            log.debug("default schema of %s not read: %s", conn.conn_id, err)
            schema = DEFAULT_SCHEMAS.get(conn_type)
        return Naming(info, schema)
    if conn_type in EMBEDDED:
        return Naming(
            DatabaseInfo(scheme=conn_type, authority=conn.host or conn.schema), DEFAULT_SCHEMAS[conn_type]
        )
    scheme = "mysql" if conn_type == "mariadb" else conn_type
    authority = DbApiHook.get_openlineage_authority_part(
        conn, default_port=3306 if scheme == "mysql" else None
    )
    # MySQL has no schemas below the database: the connection's database plays the schema's part
    return Naming(DatabaseInfo(scheme=scheme, authority=authority), conn.schema or None)


def input_tables(query: exp.Expr) -> list[tuple[str | None, str | None, str]]:
    """The tables a SELECT reads as (database, schema, table), CTE names excluded, sorted."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    seen: dict[tuple[str | None, str | None, str], None] = {}
    for table in query.find_all(exp.Table):
        if not table.name or (not table.db and table.name.lower() in ctes):
            continue
        seen[(table.catalog or None, table.db or None, table.name)] = None
    return sorted(seen, key=lambda t: tuple(p or "" for p in t))


def window_lineage(
    *,
    naming: Naming,
    query: exp.Expr,
    sql: str,
    table: str,
    partition_column: str | None,
    window: Window,
    strategy: str,
    partition_key: str | None = None,
    result: Mapping[str, Any] | None = None,
    semantics: str | None = None,
    policy_version: str | None = None,
) -> OperatorLineage:
    """The lineage of one window write: inputs, the output with its statistics, the window facets.

    `result` is what the operator returned (its XCom), or None when nothing was written (a failure).
    """
    out = dict(result or {})
    inputs = [
        InputDataset(namespace=d.namespace, name=d.name)
        for d in (naming.dataset(schema, name, database) for database, schema, name in input_tables(query))
    ]
    catalog, schema, name = table_parts(table)
    target = naming.dataset(schema, name, catalog)
    output_facets: dict[str, Any] = {}
    if isinstance(out.get("row_count"), int):
        output_facets["outputStatistics"] = (
            output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=out["row_count"])
        )
    if partition_column is not None:
        partition = Partition(dimensions={partition_column: window.label()}, identifier=partition_key)
        output_facets["subset"] = OutputSubsetOutputDatasetFacet(
            outputCondition=PartitionSubsetCondition(partitions=[partition])
        )
    facets: dict[str, Any] = {}
    if out.get("dataset_version") is not None:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=str(out["dataset_version"])
        )
    outputs = [
        OutputDataset(namespace=target.namespace, name=target.name, facets=facets, outputFacets=output_facets)
    ]
    diff = out.get("diff")
    window_facet = WindowRunFacet(
        strategy=str(out.get("strategy") or strategy),
        window=window.label(),
        windowStart=window.start.isoformat(),
        windowEnd=window.end.isoformat(),
        partitionKey=partition_key,
        ordinal=out.get("ordinal"),
        datasetVersion=out.get("dataset_version"),
        checksum=out.get("checksum"),
        fingerprint=out.get("fingerprint"),
        policyVersion=out.get("policy_version") or policy_version,
        semantics=out.get("semantics") or semantics,
        skipped=bool(out.get("skipped")),
        rowsDeleted=out.get("rows_deleted"),
        rowsInserted=out.get("rows_inserted"),
        rowsUpdated=out.get("rows_updated"),
        diff={k: int(diff[k]) for k in DIFF_COUNTS if k in diff} if isinstance(diff, Mapping) else None,
    )
    run_facets: dict[str, Any] = {
        "nominalTime": nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=window.start.isoformat(), nominalEndTime=window.end.isoformat()
        ),
        WINDOW_FACET: window_facet,
    }
    return OperatorLineage(
        inputs=inputs,
        outputs=outputs,
        run_facets=run_facets,
        job_facets={"sql": sql_job.SQLJobFacet(query=SQLParser.normalize_sql(sql))},
    )


def operator_lineage(operator: Any, task_instance: Any, completed: bool) -> OperatorLineage:
    """The lineage of a WindowWriteOperator's attempt, as the provider's listener asks for it.

    Runs on the worker after the attempt, in a process the listener forks (where pulling XCom
    hangs): the window is derived from the run again (the one rule), what was written is what the
    operator kept of its write (`lineage_result`, set where it emits its asset event; nothing on failure).
    """
    from airflow.sdk import BaseHook

    from airflow_idempotent.hooks.warehouse import WarehouseHook
    from airflow_idempotent.lint.sql import parse_one_statement

    context = task_instance.get_template_context()
    window = spanning(operator.covered(context))  # with lookback, the covered periods were written
    adapter = WarehouseHook(conn_id=operator.conn_id).adapter
    query = parse_one_statement(operator.sql, adapter.dialect)
    result = getattr(operator, "lineage_result", None) if completed else None
    conf = getattr(context.get("dag_run"), "conf", None) or {}
    semantics = conf.get("semantics") if isinstance(conf, Mapping) else None
    key = context.get("partition_key")
    return window_lineage(
        naming=naming(BaseHook.get_connection(operator.conn_id)),
        query=query,
        sql=adapter.render(query),
        table=operator.table,
        partition_column=operator.partition_column,
        window=window,
        strategy=operator.strategy,
        partition_key=key if isinstance(key, str) else None,
        result=result,
        semantics=semantics if isinstance(semantics, str) else None,
        policy_version=operator.effective_policy_version(),
    )

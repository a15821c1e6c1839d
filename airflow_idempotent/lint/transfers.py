"""Operators that write without SQL the linter can read: transfers and BigQuery jobs.

A transfer operator inserts or copies rows into a table (``S3ToSqlOperator``, ``GenericTransfer``,
``S3ToRedshiftOperator``, ``GCSToBigQueryOperator``); a ``BigQueryInsertJobOperator`` runs the SQL
of its ``configuration`` and may write its result to a ``destinationTable``. Each says by an
argument whether it appends (``method="APPEND"``, ``writeDisposition="WRITE_APPEND"``) or replaces,
and which connection it writes through; this module reads those arguments.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.facts import Write
from airflow_idempotent.lint.findings import TaskCheck

__all__ = ["ROW_WRITES", "dialect_hint", "sql_arguments", "task_conn", "transfer_writes"]

#: Calls that write rows handed over from Python (`codechecks._python_write` reads their arguments):
#: a DB-API hook's ``insert_rows(table, rows[, replace])``, BigQuery's streaming inserts
#: ``client.insert_rows`` / ``insert_rows_json`` / ``insert_rows_from_dataframe`` (no replace: each
#: call adds its rows; ``row_ids`` deduplicate only within about a minute, not a rerun), pandas'
#: ``to_sql`` and pandas-gbq's ``to_gbq`` (``if_exists``); ClickHouse's clickhouse-connect
#: ``client.insert_df(table, df)`` / ``insert_arrow(table, tbl)`` and its ``insert_file(client, table,
#: path)`` (an INSERT of the rows, no replace: round 36l).
ROW_WRITES = frozenset(
    {
        "insert_rows",
        "insert_rows_json",
        "insert_rows_from_dataframe",
        "to_sql",
        "to_gbq",
        "insert_df",
        "insert_arrow",
        "insert_file",
    }
)

#: Connection arguments of the SQL a task runs, most specific first.
_CONN_ARGS = (
    "conn_id",
    "destination_conn_id",
    "sql_conn_id",
    "postgres_conn_id",
    "mysql_conn_id",
    "snowflake_conn_id",
    "redshift_conn_id",
    "databricks_conn_id",
    "sqlite_conn_id",
    "trino_conn_id",
    "mssql_conn_id",
    "oracle_conn_id",
    "gcp_conn_id",
)
#: Operator arguments that choose the database (or schema) unqualified table names live in.
_DATABASE_ARGS = ("database", "schema")
#: The connection an operator uses when its connection argument is left out.
_DEFAULT_CONNS = {
    "S3ToRedshiftOperator": "redshift_default",
    "GCSToBigQueryOperator": "google_cloud_default",
    "BigQueryInsertJobOperator": "google_cloud_default",
    "BigQueryExecuteQueryOperator": "google_cloud_default",
    "PartitionOverwriteOperator": "warehouse",
    "MergeOperator": "warehouse",
}
_DIALECT_MARKERS = (
    ("postgres", "postgres"),
    ("redshift", "postgres"),
    ("mysql", "mysql"),
    ("maria", "mysql"),
    ("bigquery", "mysql"),  # backquoted `project.dataset.table`: MySQL's quoting reads it
    ("sqlite", "sqlite"),
    ("duckdb", "duckdb"),
)
_BIGQUERY_DISPOSITION = {"WRITE_APPEND": "append", "WRITE_TRUNCATE": "replace", "WRITE_EMPTY": "create"}


def task_conn(task: TaskDef) -> str | None:
    """The connection id a task writes through (its argument, or the operator's default), scoped by
    the operator's ``database=`` / ``schema=`` when it names one (``conn/database``): one table name
    in two databases is two tables. A database only known at run time (``database=d["name"]`` in a
    loop) is the task's own, never paired with another task's."""
    conn = next(
        (v for name in _CONN_ARGS if isinstance(v := task.scope.literal(task.kwargs.get(name)), str)),
        _DEFAULT_CONNS.get(task.operator),
    )
    for name in _DATABASE_ARGS:
        node = task.kwargs.get(name)
        if node is None:
            continue
        value = task.scope.literal(node)
        where = value.lower() if isinstance(value, str) else f"<{name} of {task.task_id}>"
        return f"{conn or ''}/{where}"
    return conn


def dialect_hint(operator: str, conn_id: str | None) -> str | None:
    """The SQL dialect an operator's or connection's name gives away (PostgresOperator, 'mysql_dwh')."""
    text = f"{operator} {conn_id or ''}".lower()
    for marker, dialect in _DIALECT_MARKERS:
        if marker in text:
            return dialect
    return None


def sql_arguments(task: TaskDef) -> list[tuple[str, ast.expr]]:
    """The arguments holding SQL the task runs: ``sql=`` (or an operator's ``query=``), a
    ``GenericTransfer``'s ``preoperator``, a BigQuery job's ``configuration["query"]["query"]``."""
    found: list[tuple[str, ast.expr]] = []
    node = task.kwargs.get("sql")
    if node is None and task.operator.endswith("Operator"):
        node = task.kwargs.get("query")
    if node is not None:
        found.append(("sql", node))
    if "preoperator" in task.kwargs:
        found.append(("preoperator", task.kwargs["preoperator"]))
    query = _job(task).get("query")
    if query is not None:
        found.extend(("sql", v) for k, v in task.scope.mapping(query).items() if k == "query")
    return found


def _job(task: TaskDef) -> dict[str, ast.expr]:
    return task.scope.mapping(task.kwargs.get("configuration")) if "configuration" in task.kwargs else {}


@dataclass(frozen=True)
class _Target:
    table: str
    how: str
    detail: str
    line: int


def transfer_writes(check: TaskCheck) -> None:
    """The table a transfer operator or a BigQuery job writes, and whether it appends."""
    target = _target(check.task)
    if target is not None:
        write = Write(
            target.table, target.how, target.detail, check.file, target.line, check.conn, check.unit
        )
        check.facts.writes.append(write)


def _target(task: TaskDef) -> _Target | None:
    scope, kwargs, op = task.scope, task.kwargs, task.operator

    def text(name: str) -> str | None:
        value = scope.literal(kwargs.get(name))
        return value if isinstance(value, str) else None

    def line_of(name: str) -> int:
        node = kwargs.get(name)
        return getattr(node, "lineno", task.line) if node is not None else task.line

    if op == "S3ToSqlOperator" and text("table"):
        table = ".".join(p for p in (text("schema"), text("table")) if p)
        return _Target(table.lower(), "append", f"{op}'s insert of the file's rows into {table}", task.line)
    if op == "GenericTransfer" and text("destination_table"):
        table = text("destination_table") or ""
        insert_args = scope.literal(kwargs.get("insert_args"))
        if isinstance(insert_args, dict) and insert_args.get("replace") is True:
            detail = f"{op}'s upsert into {table} (insert_args replace=True)"
            return _Target(table.lower(), "upsert", detail, task.line)
        return _Target(table.lower(), "append", f"{op}'s insert into {table}", task.line)
    if op == "S3ToRedshiftOperator" and text("table"):
        table = ".".join(p for p in (text("schema"), text("table")) if p)
        method = (text("method") or "APPEND").upper()
        how = {"UPSERT": "upsert", "REPLACE": "replace"}.get(method, "append")
        return _Target(table.lower(), how, f"{op}'s COPY into {table} (method={method})", line_of("method"))
    if op == "GCSToBigQueryOperator" and text("destination_project_dataset_table"):
        table = (text("destination_project_dataset_table") or "").split("$")[0]
        disposition = (text("write_disposition") or "WRITE_EMPTY").upper()
        how = _BIGQUERY_DISPOSITION.get(disposition, "append")
        return _Target(table.lower(), how, f"{op}'s load into {table} ({disposition})", task.line)
    if op == "BigQueryExecuteQueryOperator" and text("destination_dataset_table"):
        table = (text("destination_dataset_table") or "").split("$")[0]
        disposition = (text("write_disposition") or "WRITE_EMPTY").upper()
        how = _BIGQUERY_DISPOSITION.get(disposition, "append")
        detail = f"{op}'s query result into {table} ({disposition})"
        return _Target(table.lower(), how, detail, line_of("write_disposition"))
    if op == "BigQueryInsertJobOperator":
        for kind, default in (("query", "WRITE_EMPTY"), ("load", "WRITE_APPEND"), ("copy", "WRITE_EMPTY")):
            job = scope.mapping(_job(task).get(kind))
            destination = scope.mapping(job.get("destinationTable"))
            parts = [scope.literal(destination.get(k)) for k in ("projectId", "datasetId", "tableId")]
            if not destination or not all(isinstance(p, str) for p in parts):
                continue
            table = ".".join(str(p) for p in parts).split("$")[0]
            disposition_node = job.get("writeDisposition")
            literal = scope.literal(disposition_node)
            disposition = (literal if isinstance(literal, str) else default).upper()
            how = _BIGQUERY_DISPOSITION.get(disposition, "append")
            line = (
                getattr(disposition_node, "lineno", task.line) if disposition_node is not None else task.line
            )
            return _Target(table.lower(), how, f"a BigQuery {kind} job into {table} ({disposition})", line)
    return None

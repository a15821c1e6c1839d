"""Python calls that write rows (a hook's ``insert_rows``, pandas' ``to_sql``, a client told to
append), and a SQL insert whose duplicate-key error the task catches.

Split from `codechecks` (which reads the code and hands each call here): what the call writes, and
how a rerun's repeat of it lands, is decided from its arguments and the ``try`` around it.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.facts import Write
from airflow_idempotent.lint.findings import TaskCheck
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.syntax import dotted, keywords, last_name, module_function
from airflow_idempotent.lint.texts import standing_name

__all__ = ["append_mode", "client_append", "python_write", "refused_by_key", "spark_write"]

#: Errors a database raises when a row repeats a unique key (psycopg's ``UniqueViolation``, the
#: DB-API's and SQLAlchemy's ``IntegrityError``, pymongo's ``DuplicateKeyError``).
_DUPLICATE_ERRORS = frozenset({"UniqueViolation", "IntegrityError", "DuplicateKeyError"})


def refused_by_key(
    check: TaskCheck, writes: list[Write], call: ast.Call, parent_of: dict[ast.AST, ast.AST]
) -> None:
    """Round 28 (CityofToronto's GTFS feed, labelled false): ``try: cur.execute("INSERT ..") except
    UniqueViolation: raise AirflowSkipException(..)``. Catching the duplicate-key error around the
    insert says a unique key on the table refuses a repeated row: a rerun's insert fails there and adds
    none. The appends `call` ran become ``dedup`` and are said as information. An insert outside the
    ``try`` body, or a ``try`` catching other errors only, stays an append."""
    caught = _caught_duplicate(call, parent_of)
    if caught is None:
        return
    for write in writes:
        if write.how == "append":
            write.how = "dedup"
            write.detail = f"{write.detail} (in a try whose except catches {caught})"
            check.info(
                "IDEM002", write.file, write.line, f"{write.detail}: a unique key refuses a rerun's rows"
            )


def _caught_duplicate(call: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> str | None:
    """The duplicate-key error a handler of a ``try`` whose body holds `call` catches, if any."""
    child, parent = call, parent_of.get(call)
    while parent is not None and not isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        if isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                for kind in kinds:
                    if kind is not None and last_name(dotted(kind)) in _DUPLICATE_ERRORS:
                        return dotted(kind)
        child, parent = parent, parent_of.get(parent)
    return None


#: clickhouse-connect's inserts of a frame, an Arrow table or a file (round 36l: trackdechets' geocoded
#: companies, ``insert_file`` into a ``_tmp`` table made IF NOT EXISTS and renamed over the target)
_CLICKHOUSE_INSERTS = frozenset({"insert_df", "insert_arrow", "insert_file"})


def _clickhouse_target(
    node: ast.Call, position: int, table: object, kwargs: dict[str, ast.expr], scope: Scope
) -> object:
    """The table a clickhouse-connect insert names, after its ``database=``: an f-string
    (``f"raw.{name}_tmp"``) rendered as the SQL a ``client.command(f"DROP TABLE raw.{name}_tmp")``
    of the same task is, so the two name one table."""
    if not isinstance(table, str):
        named = node.args[position] if len(node.args) > position else kwargs.get("table")
        texts = [located.text for located in scope.strings(named)] if named is not None else []
        table = texts[0] if len(texts) == 1 and re.fullmatch(r"[\w.]+", texts[0]) else None
    database = scope.literal(kwargs.get("database"))
    if isinstance(table, str) and isinstance(database, str) and "." not in table:
        table = f"{database}.{table}"
    return table.lower() if isinstance(table, str) else None


def python_write(check: TaskCheck, node: ast.Call, method: str, scope: Scope, file: str) -> None:
    """hook.insert_rows(table, rows[, replace=True]), DataFrame.to_sql(name, con, if_exists=...) and
    pandas-gbq's DataFrame.to_gbq(destination_table, .., if_exists=...) (or ``pandas_gbq.to_gbq(df,
    destination_table, ..)``): the same ``if_exists`` modes, so 'append' adds the frame's rows again
    on every retry or rerun ('fail', the default, and 'replace' do not). ClickHouse's
    ``client.insert_df(table, df)``, ``insert_arrow`` and ``insert_file(client, table, path)`` always
    append."""
    kwargs = keywords(node)
    name_arg = {"to_sql": "name", "to_gbq": "destination_table"}.get(method, "table")  # insert_rows*
    position = 1 if method == "to_gbq" and module_function(node, ("pandas_gbq", "pd_gbq", "gbq")) else 0
    position = 1 if method == "insert_file" else position  # ``insert_file(client, table, path)``
    positional = node.args[position] if len(node.args) > position else None
    table = scope.literal(positional if positional is not None else kwargs.get(name_arg))
    shown = table if isinstance(table, str) else "<table>"
    if method in _CLICKHOUSE_INSERTS:  # an INSERT of the rows: a rerun adds them again
        table = _clickhouse_target(node, position, table, kwargs, scope)
        shown = table if isinstance(table, str) else "<table>"
        how, detail = "append", f"{method}({shown})"
    elif method.startswith("insert_rows"):  # BigQuery's streaming inserts have no replace: appends
        replace = scope.literal(kwargs.get("replace")) is True
        how, detail = ("upsert", f"{method}({shown}, replace=True)") if replace else ("append", "")
        detail = detail or f"{method}({shown})"
    else:
        schema = scope.literal(kwargs.get("schema"))
        if isinstance(schema, str) and isinstance(table, str):
            shown = f"{schema}.{table}"
        mode = scope.literal(kwargs.get("if_exists"))
        how = {"append": "append", "replace": "replace"}.get(mode if isinstance(mode, str) else "", "create")
        detail = f"{method}({shown}, if_exists={mode!r})" if how != "create" else f"{method}({shown})"
    named = positional if positional is not None else kwargs.get(name_arg)  # ``to_sql(name=names[i])``
    within = scope.literal(kwargs.get("schema"))
    stands_for = standing_name(named, within) if named is not None and not isinstance(table, str) else ""
    check.facts.writes.append(
        Write(shown.lower(), how, detail, file, node.lineno, check.conn, check.unit, stands_for=stands_for)
    )


#: a client method's argument that selects appending (Domo ``UpdateMethod.APPEND``, BigQuery
#: ``WriteDisposition.WRITE_APPEND``): the call adds rows to what the target holds
_APPEND_MODES = frozenset({"APPEND", "WRITE_APPEND"})


def append_mode(call: ast.Call) -> str | None:
    """The argument of `call` that selects appending (``UpdateMethod.APPEND``, ``"WRITE_APPEND"``)."""
    for value in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(value, ast.Attribute) and value.attr in _APPEND_MODES:
            return dotted(value)
        if isinstance(value, ast.Constant) and value.value == "WRITE_APPEND":
            return "'WRITE_APPEND'"
    return None


def client_append(check: TaskCheck, node: ast.Call, name: str, mode: str, scope: Scope, file: str) -> None:
    """A client call told to append (``domo.datasets.data_import(id, csv, UpdateMethod.APPEND)``): an
    append into its first argument (a dataset or table id), named when it is a constant."""
    target = scope.literal(node.args[0]) if node.args else None
    shown = target.lower() if isinstance(target, str) else f"<{last_name(name)} target>"
    detail = f"{name}(.., {mode})"
    check.facts.writes.append(Write(shown, "append", detail, file, node.lineno, check.conn, check.unit))


#: a Spark DataFrameWriter's calls that write (``df.write.mode(..).<sink>(..)``), and the argument
#: naming the target (a table, else the path)
_SPARK_SINKS = {
    "jdbc": ("table", 1),
    "saveAsTable": ("name", 0),
    "insertInto": ("tableName", 0),
    "save": ("path", 0),
    "parquet": ("path", 0),
    "csv": ("path", 0),
    "json": ("path", 0),
    "orc": ("path", 0),
}
_SPARK_MODES = {"append": "append", "overwrite": "replace"}


def spark_write(check: TaskCheck, node: ast.Call, scope: Scope, file: str) -> bool:
    """A PySpark ``df.write.mode("append").jdbc(..)`` / ``.saveAsTable(t)`` / ``.insertInto(t)``
    (which appends unless ``overwrite=True``): each run adds the frame's rows to the target again.
    ``overwrite`` replaces it; the default mode (``error``) fails on an existing target: no write
    is said. False when `node` is no DataFrameWriter sink."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in _SPARK_SINKS:
        return False
    kwargs = keywords(node)
    mode = scope.literal(kwargs.get("mode"))
    dbtable, writer, link = None, False, func.value
    while isinstance(link, ast.Attribute | ast.Call):
        if isinstance(link, ast.Attribute):
            if link.attr == "write":
                writer = True
                break
            link = link.value
            continue
        if not isinstance(link.func, ast.Attribute):
            break  # ``spark.table("t")``: the chain's start, no writer
        first = scope.literal(link.args[0]) if link.args else None
        if link.func.attr == "mode" and mode is None:
            mode = first
        elif link.func.attr == "option" and first == "dbtable" and len(link.args) == 2:
            dbtable = scope.literal(link.args[1])
        link = link.func.value
    if not writer:
        return False
    if func.attr == "insertInto" and mode is None:
        mode = "overwrite" if scope.literal(kwargs.get("overwrite")) is True else "append"
    how = _SPARK_MODES.get(mode.lower() if isinstance(mode, str) else "")
    if how is None:
        return True
    name, position = _SPARK_SINKS[func.attr]
    target = node.args[position] if len(node.args) > position else kwargs.get(name)
    table = dbtable if dbtable is not None else scope.literal(target)
    shown = table.lower() if isinstance(table, str) else "<table>"
    detail = f"DataFrame.write.mode({mode!r}).{func.attr}({shown})"
    check.facts.writes.append(Write(shown, how, detail, file, node.lineno, check.conn, check.unit))
    return True

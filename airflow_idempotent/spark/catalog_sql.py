"""The catalog statements of the parquet partition switch, built as sqlglot expressions.

ALTER TABLE .. PARTITION .. SET LOCATION / ADD / DROP, REFRESH, DROP TABLE and the sweep's trash
table: every identifier validated and quoted by the base adapter's `table` and `column`, every
partition value and location a string literal sqlglot escapes. Each statement is one catalog call
that leaves each partition it names at a complete location (old or new); `move_partitions` sends
them in SQL scripts of `MOVES_PER_SCRIPT`, or, where the Connect server has the provider's command
(`spark/command`), `set_locations` moves them in one catalog call. Kept apart from
`airflow_idempotent.spark.adapter` (its base class) so that module stays readable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from typing import Any

from sqlglot import exp

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.adapters.identifiers import table_parts

#: The error condition of a SQL script on a server whose SQL scripting is disabled.
SCRIPTING_REFUSED = "UNSUPPORTED_FEATURE.SQL_SCRIPTING"
#: At most this many SET LOCATIONs per script. A task killed while its script runs cannot stop the
#: server finishing it; the retry interrupts the dead session and stages and verifies its own window
#: (seconds) before its switch, so the dead script's tail must end well before: 8 statements take
#: ~0.5 s (~60 ms each on the test cluster), while one script for a year's 365 days could outlast
#: the retry's staging and point a day back at the dead attempt's location after the retry's sweep.
MOVES_PER_SCRIPT = 8
#: The provider's Connect command (`spark/command`) that sets partitions' locations in one call.
SET_LOCATIONS_COMMAND = "set_partition_locations"
#: At most this many partitions per such call: each call is one metastore transaction, which a
#: killed task cannot stop either, so it is kept short (as `MOVES_PER_SCRIPT` keeps a script).
LOCATIONS_PER_CALL = 100
#: Spark Connect's answer to a command extension no plugin of the server handles.
NO_HANDLER = "No handler found for extension"
#: The (Connect server URL, command) pairs whose server answered `NO_HANDLER`, for the life of the
#: process: a switch there sends its SET LOCATIONs without asking again (a refused round trip each
#: write otherwise). A server that gets the plugin later is asked again after a restart of the process.
_REFUSED: set[tuple[str, str]] = set()


class CatalogStatements(EngineAdapter):
    """The partition switch's catalog statements (Spark SQL), mixed into `SparkAdapter`."""

    def partition_spec(self, partition_column: str, value: date) -> exp.Partition:
        """``PARTITION (`p` = 'yyyy-mm-dd')``: the column validated and quoted, the value a literal."""
        eq = exp.EQ(this=self.column(partition_column), expression=exp.Literal.string(value.isoformat()))
        return exp.Partition(expressions=[eq])

    def alter(self, table: str, *actions: exp.Expr, partition: exp.Partition | None = None) -> exp.Alter:
        """ALTER TABLE `table` [PARTITION (..)] `actions`."""
        target = self.table(table)
        target.set("partition", partition)
        return exp.Alter(this=target, kind="TABLE", actions=list(actions))

    def set_location(self, table: str, partition_column: str, value: date, location: str) -> str:
        """ALTER TABLE .. PARTITION (..) SET LOCATION '..': one catalog call for one day."""
        spec = self.partition_spec(partition_column, value)
        move = exp.AlterSet(location=exp.Literal.string(location))
        return self.render(self.alter(table, move, partition=spec), copy=False)

    @staticmethod
    def script(statements: Sequence[str]) -> str:
        """`statements` as one SQL script (Spark 4's compound `BEGIN .. END`), run by the server in
        order in one round trip; one statement is sent as it is. Not a transaction: each statement
        commits on its own, and the first that fails ends the script."""
        if len(statements) == 1:
            return statements[0]
        return "BEGIN " + " ".join(f"{statement};" for statement in statements) + " END"

    def run_statements(self, conn: Any, statements: Sequence[str]) -> None:
        """Run `statements` in order as one script (`script`); a server with SQL scripting disabled
        (`spark.sql.scripting.enabled=false`, the default before Spark 4.1) refuses it before running
        anything, and then gets them one by one."""
        if not statements:
            return
        try:
            conn.sql(self.script(statements))
        except Exception as err:
            if len(statements) == 1 or SCRIPTING_REFUSED not in str(err):
                raise
            for statement in statements:
                conn.sql(statement)

    def move_partitions(
        self, conn: Any, table: str, partition_column: str, where: Sequence[tuple[date, str]]
    ) -> None:
        """Set each (value, location), `MOVES_PER_SCRIPT` to a round trip (`run_statements`): each
        SET LOCATION is one catalog call, so a crash mid-script leaves each day old or new."""
        statements = [self.set_location(table, partition_column, v, w) for v, w in where]
        for i in range(0, len(statements), MOVES_PER_SCRIPT):
            self.run_statements(conn, statements[i : i + MOVES_PER_SCRIPT])

    def set_locations(
        self, conn: Any, table: str, partition_column: str, where: Sequence[tuple[date, str]]
    ) -> bool:
        """Set each (value, location) by the provider's Connect command: one catalog call
        (``SessionCatalog.alterPartitions``) per `LOCATIONS_PER_CALL` partitions, which the Hive
        metastore applies in one transaction (all or none: tests/spark/test_spark_switch_batch.py),
        instead of a SET LOCATION each (a table read, a partition read and a refresh around each
        metastore write). False, nothing changed, when the server does not have the command or
        the table is not in the session catalog: then use `move_partitions`. A server that
        answered it has no such command is not asked again by this process (`_REFUSED`, keyed by
        the connection's `server` URL and the command's name)."""
        from google.protobuf.wrappers_pb2 import StringValue
        from pyspark.sql.connect import proto

        catalog, schema, name = table_parts(table)
        if not where or (catalog is not None and catalog.lower() != "spark_catalog"):
            return False
        server = (str(getattr(conn, "server", "")), SET_LOCATIONS_COMMAND)
        if server in _REFUSED:
            return False
        for i in range(0, len(where), LOCATIONS_PER_CALL):
            request = {
                "airflow_idempotent": SET_LOCATIONS_COMMAND,
                "database": schema,
                "table": name,
                "locations": {
                    f"{partition_column}={v.isoformat()}": w for v, w in where[i : i + LOCATIONS_PER_CALL]
                },
            }
            command = proto.Command()
            command.extension.Pack(StringValue(value=json.dumps(request)))
            try:
                conn.session.client.execute_command(command)
            except Exception as err:
                if i == 0 and NO_HANDLER in str(err):
                    if server[0]:
                        _REFUSED.add(server)
                    return False
                raise
        return True

    def add_partitions(self, table: str, partition_column: str, where: Sequence[tuple[date, str]]) -> str:
        """One ALTER TABLE .. ADD IF NOT EXISTS PARTITION (..) LOCATION '..' PARTITION (..) .. for
        every (value, location): Spark's grammar takes several partition specs in one ADD, and the
        catalog creates them in one call. IF NOT EXISTS keeps an existing partition's location."""
        return self.add_statement(table, partition_column, where, exists=True)

    def add_statement(
        self, table: str, partition_column: str, where: Sequence[tuple[date, str]], exists: bool
    ) -> str:
        """ALTER TABLE .. ADD [IF NOT EXISTS] PARTITION (..) LOCATION '..' PARTITION (..) .. from
        sqlglot's AddPartition clauses: its generator writes each as `ADD PARTITION .., ADD ..`, which
        Spark refuses, so the first is rendered whole and the others' specs follow it, space apart."""
        adds = [
            self.render(
                exp.AddPartition(
                    this=self.partition_spec(partition_column, value),
                    exists=exists,
                    location=exp.LocationProperty(this=exp.Literal.string(location)),
                ),
                copy=False,
            )
            for value, location in where
        ]
        head = self.render(self.alter(table), copy=False)
        clause = "ADD IF NOT EXISTS " if exists else "ADD "
        return " ".join([head, adds[0], *(a.removeprefix(clause) for a in adds[1:])])

    def drop_partitions(self, table: str, partition_column: str, values: Sequence[date]) -> str:
        """One ALTER TABLE .. DROP IF EXISTS PARTITION (..), PARTITION (..) for every value."""
        specs = [self.partition_spec(partition_column, value) for value in values]
        return self.render(self.alter(table, exp.DropPartition(expressions=specs, exists=True)), copy=False)

    def refresh(self, table: str) -> str:
        return self.render(exp.Refresh(this=self.table(table), kind="TABLE"), copy=False)

    def drop_table(self, table: str, exists: bool = True, purge: bool = False) -> str:
        drop = exp.Drop(tables=[self.table(table)], kind="TABLE", exists=exists, purge=purge)
        return self.render(drop, copy=False)

    def trash_statements(
        self, trash: str, table: str, partition_column: str, dirs: Sequence[str]
    ) -> list[str]:
        """Delete `dirs` through the catalog (the worker may not see the cluster's storage).

        A managed table LIKE the target is given one partition per directory and dropped with
        PURGE: dropping a managed table deletes its partitions' directories wherever they are.
        The partition values are placeholders (one day each from 1970-01-01), never read.
        """
        like = exp.Properties(expressions=[exp.LikeProperty(this=self.table(table))])
        out = [
            self.drop_table(trash, purge=True),
            self.render(exp.Create(this=self.table(trash), kind="TABLE", properties=like), copy=False),
        ]
        base = date(1970, 1, 1).toordinal()
        if dirs:  # one catalog call for every directory
            where = [(date.fromordinal(base + i), d) for i, d in enumerate(dirs)]
            out.append(self.add_statement(trash, partition_column, where, exists=False))
        out.append(self.drop_table(trash, exists=False, purge=True))
        return out  # run as one script (`run_statements`): one round trip instead of four

"""`SparkAdapter.describe` reads a table from its schema and DESCRIBE TABLE EXTENDED, without the
catalog's ``listColumns`` command: what it says must be what ``listColumns`` says (names, types,
nullability, partition columns), for each table format, asked here of the catalog directly."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_idempotent.errors import SchemaError
from airflow_idempotent.spark.adapter import SparkAdapter, SparkConnection, SparkEngine
from airflow_idempotent.spark.cluster import ICEBERG_CATALOG

pytestmark = pytest.mark.spark

COLUMNS = (
    "c DECIMAL(12,3), e TIMESTAMP, f TIMESTAMP_NTZ, g ARRAY<INT>, h STRUCT<x: INT, y: STRING>, "
    "i MAP<STRING, BIGINT>, j BIGINT{not_null}, k STRING, d DATE"
)


@pytest.mark.parametrize(
    ("using", "char", "not_null"),
    [("parquet", True, False), ("delta", True, True), ("iceberg", False, True)],
)
def test_describe_says_what_the_catalog_lists(spark: Any, using: str, char: bool, not_null: bool) -> None:
    name = f"describe_{using}_{uuid.uuid4().hex[:8]}"
    if using == "iceberg":
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.idem")
        name = f"{ICEBERG_CATALOG}.idem.{name}"
    columns = COLUMNS.format(not_null=" NOT NULL" if not_null else "")
    if char:
        columns = f"a CHAR(5), b VARCHAR(7), {columns}"
    spark.sql(f"CREATE TABLE {name} ({columns}) USING {using} PARTITIONED BY (d)")
    listed = spark.catalog.listColumns(name)
    info = SparkAdapter(SparkEngine("sc://unused")).describe(SparkConnection(spark, "test"), name)

    assert [(c.name, c.type_name, c.nullable) for c in info.columns.values()] == [
        (c.name, c.dataType, c.nullable) for c in listed
    ]
    assert info.partition_columns == tuple(c.name for c in listed if c.isPartition) == ("d",)
    assert info.provider == using
    # CHAR(5) is listed as a string; the schema's metadata keeps it (its rows hash differently as
    # written and as read back); DESCRIBE spells it char(5) for a parquet table only
    assert info.padded_chars is char
    assert dict(info.char_lengths or {}) == ({"a": 5} if char and using == "parquet" else {})
    assert info.columns["j"].nullable is not not_null


def test_a_missing_table_is_named_with_the_fix(spark: Any) -> None:
    adapter = SparkAdapter(SparkEngine("sc://unused"))
    with pytest.raises(SchemaError, match=r"table 'no_such_table_here' does not exist .* create it first"):
        adapter.describe(SparkConnection(spark, "test"), "no_such_table_here")

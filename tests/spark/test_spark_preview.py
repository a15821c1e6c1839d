"""The rerun preview on Spark: what a rerun of a window would change, on Delta, Iceberg and parquet
tables, with nothing written (no commit, no snapshot, no partition moved, no view left).

The day holds v1 (written by the operator); the preview renders the v2 task as a run would
(`write_spec`) and compares. Expected figures come from the scenario's formula (`day_truth`,
`expensive`, `amount`) and from SQL written here, never from the code under test.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from airflow_idempotent.hooks.warehouse import WarehouseHook
from airflow_idempotent.preview.diff import preview_write
from tests.spark.payouts_spark import DAY, all_days, amount, context, create_payouts, day_truth, operator
from tests.spark.test_spark_delta import create_delta_payouts
from tests.spark.test_spark_iceberg import create_iceberg_payouts
from tests.test_guard_operator import expensive

pytestmark = pytest.mark.spark


def state(spark: Any, table: str, fmt: str) -> Any:
    """What a write would change, read by SQL written here: the commits (Delta, Iceberg) or the
    partitions and their files (parquet)."""
    spark.sql(f"REFRESH TABLE {table}")
    if fmt == "delta":
        return [r["version"] for r in spark.sql(f"DESCRIBE HISTORY {table}").collect()]
    if fmt == "iceberg":
        return [r["snapshot_id"] for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots").collect()]
    return sorted(r[0] for r in spark.sql(f"SELECT DISTINCT input_file_name() FROM {table}").collect())


def window_checksum(spark: Any, table: str) -> tuple[int, Decimal]:
    row = spark.sql(
        f"SELECT count(*) AS n, sum(amount_eur) AS s FROM {table} WHERE sale_date = DATE'{DAY.isoformat()}'"
    ).collect()[0]
    return int(row["n"]), Decimal(row["s"])


@pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
def test_rerun_preview_on_spark_names_the_change_and_writes_nothing(spark, spark_conn, history, fmt) -> None:
    if fmt == "delta":
        table = "payouts_preview"
        create_delta_payouts(spark, table)
    elif fmt == "iceberg":
        table = create_iceberg_payouts(spark, "payouts_preview")
    else:
        table = "payouts_preview_pq"
        create_payouts(spark, table)
    operator(spark_conn, table).execute(context(DAY))
    assert all_days(spark, table) == {DAY: day_truth(DAY, "v1")}
    before = state(spark, table, fmt)

    task = operator(spark_conn, table, parameters={"policy_version": "v2"})
    adapter = WarehouseHook(conn_id=spark_conn).adapter
    spec = task.write_spec(context(DAY), adapter)
    out = preview_write(adapter, spec, ["sale_id"], ["amount_eur"])

    changed = expensive(DAY)
    assert out.diff is not None
    assert (out.diff.changed, out.diff.added, out.diff.removed) == (len(changed), 0, 0)
    assert out.diff.unchanged == 2000 - len(changed)
    delta = sum((amount(i, "v2") - amount(i, "v1") for i in changed), Decimal("0"))
    sums = out.measure_sums["amount_eur"]
    totals = (Decimal(str(sums[0])), Decimal(str(sums[1])))
    assert totals == (day_truth(DAY, "v1")[1], day_truth(DAY, "v2")[1])
    assert Decimal(str(sums[1])) - Decimal(str(sums[0])) == delta
    assert (out.rows_before, out.rows_after, out.rows_outside_window) == (2000, 2000, 0)
    assert out.checksum_before != out.checksum_after
    assert len(out.samples["changed"]) == 10 and all(k[0] in changed for k in out.samples["changed"])
    # nothing written: the same commits / files, the same rows
    assert state(spark, table, fmt) == before
    assert window_checksum(spark, table) == day_truth(DAY, "v1")
    assert all_days(spark, table) == {DAY: day_truth(DAY, "v1")}
    assert DAY + timedelta(days=1) not in all_days(spark, table)

"""The project's guarded payouts DAG on Spark, for tests/spark/test_spark_scheduler.py.

`payouts_overwrite` of dags/payouts.py (the project's guard by month, checked by the test; the
same policy param, SQL and key) with `conn_id` a `spark_connect` connection, and a window of a
month over the table's daily partitions: one task writes the month, its 31 partitions switched
whole (one task instead of 30 keeps the Spark group within its time). For a test cluster it has an
`end_date` in August 2026 (unpausing creates no scheduled run; only the test's backfill runs) and
a short retry delay. `idem_spark_payouts_delta` is the same DAG on a Delta table, which the guard
commits whole by one REPLACE WHERE from its staging.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GuardConfig, Thresholds
from airflow_idempotent.operators import PartitionOverwriteOperator

PARAMS = {"policy_version": Param("v1", type="string", enum=["v1", "v2"])}
GUARD = GuardConfig(
    cap=31, measures=["amount_eur"], thresholds=Thresholds(max_shrink=0.10), granularity="month"
)

for dag_id, table in (
    ("idem_spark_payouts_overwrite", "payouts_scheduled"),
    ("idem_spark_payouts_delta", "payouts_scheduled_delta"),
):
    with DAG(
        dag_id=dag_id,
        schedule="@monthly",
        start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
        end_date=pendulum.datetime(2026, 8, 31, tz="UTC"),
        catchup=False,
        params={**PARAMS, **GUARD.param()},
        default_args={"retries": 2, "retry_delay": timedelta(seconds=2)},
        tags=["idempotent", "payouts", "spark"],
    ):
        PartitionOverwriteOperator(
            task_id="write_payouts",
            conn_id="idem_spark_month",  # spark_connect: host, port of the Spark Connect server
            table=table,
            partition_column="sale_date",
            key_columns=["sale_id"],
            sql=PAYOUT_SQL,
            parameters={"policy_version": "{{ params.policy_version }}"},
            granularity="month",
        )

# Lint corpus: SQL imported from another module (read, not imported)
# expect: none
# expect-ack: none
"""The payouts SQL comes from the package's example module; the linter reads it from disk."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.operators import PartitionOverwriteOperator

with DAG(
    dag_id="c27_payouts",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    PartitionOverwriteOperator(
        task_id="write_payouts",
        table="c27_payouts",
        partition_column="sale_date",
        granularity="day",
        sql=PAYOUT_SQL,
        parameters={"policy_version": "v1"},
    )

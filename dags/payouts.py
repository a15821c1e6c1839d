"""The payout that ran twice: the reference scenario as three DAGs.

- payouts_overwrite: PartitionOverwriteOperator, delete the day and insert it, one transaction.
- payouts_merge: MergeOperator, upsert on sale_id (and delete sales that vanished from the day).
- payouts_append_naive: the contrast, a plain SQLExecuteQueryOperator INSERT that appends on
  every rerun to its own unkeyed table payouts_naive.

All read `sales` and write through the Airflow connection `warehouse`. The payout policy is a
DAG param (default v1); a run's conf {"policy_version": "v2"} overrides it, and it reaches the
SQL only as a bound parameter. The window is the day of the logical date: `@daily` on the
default cron timetable gives a zero-width data interval, so the operators declare
granularity="day".
"""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG, Param, task

from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payouts
from airflow_idempotent.guard import GuardConfig, Thresholds
from airflow_idempotent.hooks.warehouse import WarehouseHook
from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator

CONN_ID = "warehouse"
START = pendulum.datetime(2026, 8, 1, tz="UTC")
PARAMS = {
    "policy_version": Param(
        "v1",
        type="string",
        enum=["v1", "v2"],
        description="Payout policy: v1 flat 0.60; v2 0.55 at or above 400.00.",
    )
}
POLICY = {"policy_version": "{{ params.policy_version }}"}
#: Backfills of the guarded DAGs: at most 31 days, declared semantics, stop on a shrinking result.
GUARD = GuardConfig(cap=31, measures=["amount_eur"], thresholds=Thresholds(max_shrink=0.10))
GUARDED_PARAMS = {**PARAMS, **GUARD.param()}


@task
def ensure_table(table: str = "payouts", keyed: bool = True) -> None:
    """Create the target when it is missing; an existing table is left as it is."""
    create_payouts(WarehouseHook(conn_id=CONN_ID).engine, table=table, keyed=keyed)


with DAG(
    dag_id="payouts_overwrite",
    schedule="@daily",
    start_date=START,
    catchup=False,
    params=GUARDED_PARAMS,
    default_args={"retries": 2},
    tags=["idempotent", "payouts"],
    doc_md="Payouts by partition overwrite: a rerun of any day leaves 2,000 rows, whatever a crash left.",
):
    # idempotent: ack IDEM007 overwrite and merge are two alternatives for one table, shown side by side
    ensure_table() >> PartitionOverwriteOperator(
        task_id="write_payouts",
        conn_id=CONN_ID,
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        parameters=POLICY,
        granularity="day",
    )

with DAG(
    dag_id="payouts_merge",
    schedule="@daily",
    start_date=START,
    catchup=False,
    params=GUARDED_PARAMS,
    default_args={"retries": 2},
    tags=["idempotent", "payouts"],
    doc_md="Payouts by merge on sale_id: a rerun updates the same keys and inserts none twice.",
):
    # idempotent: ack IDEM007 overwrite and merge are two alternatives for one table, shown side by side
    ensure_table() >> MergeOperator(
        task_id="merge_payouts",
        conn_id=CONN_ID,
        table="payouts",
        key_columns=["sale_id"],
        partition_column="sale_date",
        delete_missing=True,
        sql=PAYOUT_SQL,
        parameters=POLICY,
        granularity="day",
    )

with DAG(
    dag_id="payouts_append_naive",
    schedule="@daily",
    start_date=START,
    catchup=False,
    tags=["payouts", "anti-pattern"],
    doc_md="The anti-pattern: INSERT .. SELECT for the day, no delete, no key. Every rerun appends.",
):
    # idempotent: ack IDEM002 the anti-pattern on purpose: the demo's contrast
    ensure_table(table="payouts_naive", keyed=False) >> SQLExecuteQueryOperator(
        task_id="append_payouts",
        conn_id=CONN_ID,
        sql=(
            "INSERT INTO payouts_naive (sale_id, sale_date, amount_eur, rate) "
            "SELECT sale_id, sale_date, ROUND(price_eur * 0.60, 2), 0.60 FROM sales "
            "WHERE sale_date = '{{ ds }}'"
        ),
    )

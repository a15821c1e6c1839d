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

import html

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG, Param, Variable, task

from airflow_idempotent import effects
from airflow_idempotent.examples.bank_file import (
    bank_file_name,
    check_complete,
    parse_header,
    render_bank_file,
)
from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payouts
from airflow_idempotent.guard import GuardConfig, Thresholds
from airflow_idempotent.history.store import airflow_home
from airflow_idempotent.hooks.warehouse import WarehouseHook
from airflow_idempotent.operators import MergeOperator, PartitionOverwriteOperator
from airflow_idempotent.window import window_from_context

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


# --------------------------------------------------------------------------------------------
# The 09:00 bank file and its notification: external effects, each at most once per window.
# --------------------------------------------------------------------------------------------


def _yesterday(context: dict) -> tuple:
    """The run at 09:00 on day D delivers day D-1: the day ending at the run's logical date."""
    window = window_from_context(context, "day", anchor="end")
    return window.start_date(), window.end_date()


@task(retries=3)
def deliver_bank_file(**context) -> dict:
    """Yesterday's payouts as a bank file in the outbox: written to a temporary name, renamed
    atomically, byte-identical on rerun, delivered once per window (a rerun is skipped)."""
    start, end = _yesterday(context)
    engine = WarehouseHook(conn_id=CONN_ID).engine
    outbox = Variable.get("payouts_bank_outbox", default=str(airflow_home() / "outbox" / "bank"))

    def content() -> bytes:  # only when the file is to be delivered; any error here sends nothing
        check_complete(engine, start, end)  # a half-written window is never paid out
        return render_bank_file(engine, start, end)

    effect = effects.FileDeliveryEffect(
        name="bank-file", directory=outbox, filename=bank_file_name(start, end), content=content
    )
    return effects.perform(effect, context=context, granularity="day", anchor="end").as_dict()


@task(retries=3)
def notify_payouts_team(bank_file: dict, **context) -> dict:
    """One email per window and recipient list (the business key), with a stable Message-ID."""
    start, _ = _yesterday(context)
    path = bank_file["details"]["path"]
    with open(path, "rb") as f:
        header = parse_header(f.readline())
    to = Variable.get("payouts_notify_to", default="payouts-ops@example.com")
    effect = effects.EmailEffect(
        name="bank-file-notification",
        to=to,
        subject=f"Payouts {start}: bank file delivered ({header['rows']} rows, {header['total_eur']} EUR)",
        html_content=(
            f"<p>The payouts bank file for {start} was delivered: <code>{html.escape(path)}</code>, "
            f"{html.escape(str(header['rows']))} payouts, {html.escape(str(header['total_eur']))} EUR, "
            f"sha256 <code>{html.escape(str(bank_file['details']['sha256']))}</code>.</p>"
        ),
        smtp_conn_id="smtp_default",
    )
    return effects.perform(effect, key=to, context=context, granularity="day", anchor="end").as_dict()


with DAG(
    dag_id="payouts_bank_file",
    schedule="0 9 * * *",  # 09:00 UTC: yesterday's payouts go to the bank
    start_date=START,
    catchup=False,
    default_args={"retries": 3},
    tags=["idempotent", "payouts", "effects"],
    doc_md=(
        "The 09:00 bank file of yesterday's payouts and a notification, each at most once per window: "
        "a retry or rerun is skipped (logged with the original result); a crash between the call and "
        "its record is reconciled, or waits for `airflow-idempotent effects resolve`. A corrective "
        "backfill re-sends nothing unless its conf says so: "
        '{"semantics": "corrective", "reason": "...", "policy_version": "v2", "resend_effects": true}.'
    ),
):
    notify_payouts_team(deliver_bank_file())

# Lint corpus: bash $(date +%F) and $(date -d yesterday +%F)
# expect: IDEM003@18 IDEM004@21
# expect-ack: none
"""A bash task that asks the shell for the date."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

with DAG(
    dag_id="c25_exports",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    today = BashOperator(task_id="export_today", bash_command="python export.py --day $(date +%F)")
    yesterday = BashOperator(
        task_id="export_yesterday",
        bash_command="python export.py --day $(date -d yesterday +%F)",
    )
    from_run = BashOperator(task_id="export_run_day", bash_command="python export.py --day {{ ds }}")

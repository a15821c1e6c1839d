"""Weekly cohort table: windows taken relative to the run, never to the clock."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

with DAG(
    dag_id="weekly_cohorts",
    schedule="0 3 * * 1",
    start_date=pendulum.datetime(2025, 1, 6, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    cohorts = SQLExecuteQueryOperator(
        task_id="rebuild_cohorts",
        conn_id="postgres_dw",
        sql="""
            DELETE FROM mart.weekly_cohorts WHERE week_start = '{{ macros.ds_add(ds, -7) }}';
            INSERT INTO mart.weekly_cohorts (week_start, cohort, users)
            SELECT '{{ macros.ds_add(ds, -7) }}', signup_week, COUNT(*)
            FROM core.users
            WHERE last_seen >= '{{ (data_interval_start - macros.timedelta(days=7)).isoformat() }}'
              AND last_seen < '{{ data_interval_start.isoformat() }}'
            GROUP BY signup_week;
        """,
    )
    report = BashOperator(
        task_id="render_report",
        bash_command="python /opt/jobs/cohort_report.py --week {{ data_interval_start | ds }} --force",
    )
    cohorts >> report

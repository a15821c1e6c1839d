"""MySQL page counters: INSERT IGNORE, an upsert, and an upsert that adds."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

with DAG(
    dag_id="page_counters",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    pages = SQLExecuteQueryOperator(
        task_id="register_pages",
        conn_id="mysql_web",
        sql="INSERT IGNORE INTO web.pages (url) SELECT DISTINCT url FROM web.hits WHERE hit_date = '{{ ds }}'",
    )
    daily = SQLExecuteQueryOperator(
        task_id="daily_hits",
        conn_id="mysql_web",
        sql="""
            INSERT INTO web.daily_hits (url, hit_date, hits)
            SELECT url, hit_date, COUNT(*) FROM web.hits WHERE hit_date = '{{ ds }}' GROUP BY url, hit_date
            ON DUPLICATE KEY UPDATE hits = VALUES(hits)
        """,
    )
    lifetime = SQLExecuteQueryOperator(
        task_id="lifetime_hits",
        conn_id="mysql_web",
        sql="""
            INSERT INTO web.lifetime_hits (url, hits)
            SELECT url, COUNT(*) FROM web.hits WHERE hit_date = '{{ ds }}' GROUP BY url
            ON DUPLICATE KEY UPDATE hits = hits + VALUES(hits)
        """,
    )
    pages >> [daily, lifetime]

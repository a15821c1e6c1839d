"""Daily balances snapshot stamped with its load time; the change feed picks rows by that stamp."""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG

SNAPSHOT = """
DELETE FROM finance.balance_snapshot WHERE snapshot_date = '{{ ds }}';
INSERT INTO finance.balance_snapshot (snapshot_date, account_id, balance, loaded_at)
SELECT '{{ ds }}', account_id, balance, now()
FROM finance.accounts;
"""

# the feed sends what was loaded during its interval: the snapshot's load stamp is its mark
FEED = """
DELETE FROM finance.balance_feed WHERE feed_date = '{{ ds }}';
INSERT INTO finance.balance_feed (feed_date, account_id, balance)
SELECT '{{ ds }}', account_id, balance
FROM finance.balance_snapshot
WHERE loaded_at >= '{{ data_interval_start }}' AND loaded_at < '{{ data_interval_end }}';
"""

with DAG(
    dag_id="balance_snapshot_feed",
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
):
    snapshot = SQLExecuteQueryOperator(task_id="snapshot_balances", conn_id="postgres_finance", sql=SNAPSHOT)
    feed = SQLExecuteQueryOperator(task_id="feed_balances", conn_id="postgres_finance", sql=FEED)
    snapshot >> feed

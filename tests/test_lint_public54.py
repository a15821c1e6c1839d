"""Round 36c (issue 35, lint54): IDEM001, IDEM006 and IDEM007 raise a defect only in the shapes every
useful label of rounds 1-36 shares; what else they find is information (docs/lint-evaluation.md).
Each defect shape is tested next to its harmless counterpart, in a few hand-written lines; what each
test expects is what a reviewer would say of the snippet, decided by hand:

- IDEM001 (`clockroles`): the clock's day picks the rows (``x::date = CURRENT_DATE``; a DELETE by
  ``= CURRENT_DATE``) or files them (``date_trunc('week', now())`` / ``CURRENT_DATE`` written into rows
  a table keeps); a range test of current state or a timestamp stamp is information;
- IDEM006 (`sendtargets`): a retried send whose URL names what it creates (``/orders``, ``/save``) or
  one e-mail per record in a loop; a notice or a refresh of another service is information;
- IDEM007 (`shared`): one task empties the table whole while the other's rows are not rebuilt by it,
  or two DAGs add to the same rows; a load and a later update of its rows in one DAG is information.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, lint_paths


def _lint(tmp_path: Path, text: str) -> LintReport:
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "pipeline.py").write_text(text)
    return lint_paths([tmp_path])


def _tasks(items: list, rule: str) -> list[str | None]:  # type: ignore[type-arg]
    return sorted(f.task_id or "" for f in items if f.rule == rule)


_HEAD = """import pendulum
from airflow.sdk import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG("pipeline", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
"""


def _sql(task_id: str, sql: str) -> str:
    return f'    SQLExecuteQueryOperator(task_id="{task_id}", conn_id="pg", sql="""{sql}""")\n'


def test_clock_day_picking_rows_is_a_defect_and_a_current_state_test_is_information(tmp_path: Path) -> None:
    text = _HEAD + "".join(
        [
            _sql(
                "todays_users",
                "INSERT INTO out.users SELECT id FROM app.users WHERE created_at::date = CURRENT_DATE",
            ),
            _sql("drop_today", "DELETE FROM out.snap WHERE snapshot_date = CURRENT_DATE"),
            _sql("active_promos", "SELECT sku FROM app.promos WHERE CURRENT_DATE BETWEEN starts AND ends"),
            _sql("expire", "DELETE FROM app.sessions WHERE expiry < now()"),
        ]
    )
    report = _lint(tmp_path, text)
    assert _tasks(report.findings, "IDEM001") == ["drop_today", "todays_users"]
    assert _tasks(report.information, "IDEM001") == ["active_promos", "expire"]


def test_clock_date_filing_rows_is_a_defect_and_a_timestamp_stamp_is_information(tmp_path: Path) -> None:
    text = _HEAD + "".join(
        [
            _sql(
                "weekly_map",
                "INSERT INTO out.weekly (week_view, id) SELECT date_trunc('week', now()), id FROM u",
            ),
            _sql(
                "daily_id",
                "INSERT INTO out.sizes (id, size) SELECT to_char(CURRENT_DATE, 'YYYYMMDD')::int, 1",
            ),
            _sql("stamped", "INSERT INTO out.events (id, loaded_at) SELECT id, now() FROM app.events"),
            _sql("measured", "INSERT INTO out.counts SELECT now(), count(*) FROM app.files"),
        ]
    )
    report = _lint(tmp_path, text)
    assert _tasks(report.findings, "IDEM001") == ["daily_id", "weekly_map"]
    assert _tasks(report.information, "IDEM001") == ["measured", "stamped"]


_SENDS = """import pendulum
import requests
from airflow.sdk import DAG, task
from airflow.utils.email import send_email

with DAG("sends", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1), catchup=False,
         default_args={"retries": 2}):

    @task
    def place_orders(rows):
        url = f"{BASE}/portfolio/inner/orders"
        requests.post(url, json=rows)

    @task
    def ticket_per_issue(issues):
        for issue in issues:
            send_email(to="tickets@example.com", subject=issue["title"], html_content="")

    @task
    def refresh_accounts():
        requests.patch(f"{BASE}/inner/accounts/refresh", json={})

    @task
    def report_mail():
        send_email(to="team@example.com", subject="daily report", html_content="")

    place_orders([]) >> ticket_per_issue([]) >> refresh_accounts() >> report_mail()
"""


def test_a_send_that_creates_something_is_a_defect_and_a_notice_is_information(tmp_path: Path) -> None:
    report = _lint(tmp_path, _SENDS)
    assert _tasks(report.findings, "IDEM006") == ["place_orders", "ticket_per_issue"]
    assert _tasks(report.information, "IDEM006") == ["refresh_accounts", "report_mail"]


_TWO_DAGS = """import pendulum
from airflow.sdk import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG("prices_a", schedule="0 7 * * *", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    SQLExecuteQueryOperator(task_id="wipe", conn_id="pg", sql="TRUNCATE cat.prices")

with DAG("prices_b", schedule="0 7 * * *", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    SQLExecuteQueryOperator(task_id="upload", conn_id="pg", sql="INSERT INTO cat.prices SELECT * FROM s.p")

with DAG("orders", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    load = SQLExecuteQueryOperator(
        task_id="load", conn_id="pg",
        sql="INSERT INTO ops.orders (id, amount) SELECT id, amount FROM s.o ON CONFLICT (id) DO NOTHING",
    )
    tag = SQLExecuteQueryOperator(
        task_id="tag", conn_id="pg", sql="UPDATE ops.orders SET channel = 'web' WHERE channel IS NULL",
    )
    load >> tag
"""


def test_a_whole_table_clear_beside_another_dags_load_is_a_defect_and_load_then_update_is_information(
    tmp_path: Path,
) -> None:
    report = _lint(tmp_path, _TWO_DAGS)
    assert _tasks(report.findings, "IDEM007") == ["upload", "wipe"]
    assert _tasks(report.information, "IDEM007") == ["load", "tag"]

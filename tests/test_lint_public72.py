"""Round 36j of issue 35 (lint72, docs/lint-evaluation.md): shapes of rounds 41-44's harmless and false
findings, each with its counter-shape.

(a) A rolling delete-and-reinsert of a window counted back from a date clock (``DELETE .. WHERE ts >=
CURRENT_DATE - 2`` then the insert of the same span, one task, ``catchup=False``) is a rolling
reprocessing window: ``CURRENT_DATE - N`` starts at a midnight, so it spans N days and the run's own
day, as many whole days in each run's window as ``now() - (N+1) days``. ``CURRENT_DATE - 1`` on a daily
DAG (two periods) stays a finding.
(b) A schedule handed to a helper the repository does not hold (``get_schedule("0 22 * * *")``) is that
cron; a helper handed anything else stays unknown.
(c) A snapshot of current state filed under today's date, deleted first in the same SQL (IDEM001):
information with catch-up off; a finding when the clock also chooses the rows, or the DAG catches up.
(d) ClickHouse ``INSERT INTO TABLE FUNCTION postgresql(.., 'table', ..)`` writes that table (a TRUNCATE
of it in an upstream task makes the append information); ``INSERT INTO FUNCTION s3(..)`` is an export,
no append.
(e) PL/SQL ``EXECUTE IMMEDIATE 'TRUNCATE TABLE t'`` in a ``BEGIN .. END`` block empties ``t`` before the
block's insert.
(f) A window counted back from the clock that fills a table the task empties whole first (``TRUNCATE``,
``DELETE`` without ``WHERE`` or ``WHERE 1=1``, ``DROP`` then ``CREATE .. AS``), directly or through a
temporary table of SQL that fills no other table, is a current-state rebuild (IDEM004 information);
a window deleted by its own span, or a temporary table appended elsewhere, stays.
(g) A DAG factory's local ``default_dag_args = {'start_date': pendulum.today(tz='UTC'), ..}`` is the
DAG's ``default_args``, and a clock start written there is read (at the factory's call): IDEM003, or
information when it is moot (round 36i's rule).

Lines are counted by hand in the files below. On main 3f250a6 12 of these 22 tests fail; the 10 that
pass there are the counter-shapes, which keep their findings.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport
from tests.lintfiles import lint_files

_SQL_HEAD = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
{imports}
with DAG("d", schedule={schedule}, start_date=datetime(2024, 1, 1), catchup={catchup}) as dag:
    SQLExecuteQueryOperator(task_id="load", conn_id="dwh", sql=\"\"\"
{sql}
\"\"\")
"""
# the SQL starts on line 8 of the DAG file when `imports` is one line


def _sql_dag(sql: str, schedule: str = '"0 22 * * *"', catchup: str = "False", imports: str = "") -> str:
    return _SQL_HEAD.format(sql=sql, schedule=schedule, catchup=catchup, imports=imports or "#")


def _rows(report: LintReport, rule: str) -> tuple[list[int], list[int]]:
    """Lines of the rule's findings, and of its information."""
    return (
        sorted(f.line for f in report.findings if f.rule == rule),
        sorted(f.line for f in report.information if f.rule == rule),
    )


_ROLLING = """\
DELETE FROM stg.events WHERE event_ts >= CURRENT_DATE - {days};
INSERT INTO stg.events SELECT id, event_ts FROM raw.events WHERE event_ts >= CURRENT_DATE - {days};"""


def test_rolling_date_window_deleted_and_reinserted_is_information(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/d.py": _sql_dag(_ROLLING.format(days=2))})
    found, info = _rows(report, "IDEM004")
    assert found == []
    assert 8 in info
    message = next(f.message for f in report.information if f.rule == "IDEM004" and f.line == 8)
    assert "the days since the midnight 2 days back (3 days with today)" in message


def test_rolling_date_window_of_one_day_back_stays(tmp_path: Path) -> None:
    found, _ = _rows(lint_files(tmp_path, {"dags/d.py": _sql_dag(_ROLLING.format(days=1))}), "IDEM004")
    assert found == [8]


def test_rolling_date_window_with_catchup_stays(tmp_path: Path) -> None:
    dag = _sql_dag(_ROLLING.format(days=2), catchup="True")
    found, _ = _rows(lint_files(tmp_path, {"dags/d.py": dag}), "IDEM004")
    assert found == [8]


def _helper_schedule_dag(argument: str) -> str:
    schedule = f"get_schedule({argument})"
    return _sql_dag(
        _ROLLING.format(days=2), schedule=schedule, imports="from plugins.dag_utils import get_schedule"
    )


def test_schedule_handed_to_an_absent_helper_is_read(tmp_path: Path) -> None:
    found, info = _rows(lint_files(tmp_path, {"dags/d.py": _helper_schedule_dag('"0 22 * * *"')}), "IDEM004")
    assert found == []
    assert 8 in info


def test_absent_helper_handed_no_cron_stays_unknown(tmp_path: Path) -> None:
    found, _ = _rows(lint_files(tmp_path, {"dags/d.py": _helper_schedule_dag('"staging"')}), "IDEM004")
    assert found == [8]


_SNAPSHOT = """\
DELETE FROM rpt.stock_snapshot
WHERE snapshot_date = CURRENT_DATE;
INSERT INTO rpt.stock_snapshot
SELECT CURRENT_DATE AS snapshot_date, sku, quantity
FROM stg.stock_file{where};"""


def test_snapshot_deleted_first_under_today_is_information(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/d.py": _sql_dag(_SNAPSHOT.format(where=""))})
    found, info = _rows(report, "IDEM001")
    assert found == []
    assert info == [9, 11]
    assert all("a snapshot of current state" in f.message for f in report.information if f.rule == "IDEM001")


def test_snapshot_of_rows_the_clock_chooses_stays(tmp_path: Path) -> None:
    sql = _SNAPSHOT.format(where="\nWHERE date(loaded_at) = CURRENT_DATE")
    found, _ = _rows(lint_files(tmp_path, {"dags/d.py": _sql_dag(sql)}), "IDEM001")
    assert found != []


def test_snapshot_in_a_dag_that_catches_up_stays(tmp_path: Path) -> None:
    dag = _sql_dag(_SNAPSHOT.format(where=""), catchup="True")
    found, _ = _rows(lint_files(tmp_path, {"dags/d.py": dag}), "IDEM001")
    assert found == [9]


_CLICKHOUSE = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.postgres.operators.postgres import PostgresOperator
from airflow_clickhouse_plugin.operators.clickhouse_operator import ClickHouseOperator

with DAG("x", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
{truncate}    ClickHouseOperator(
        task_id="export",
        sql='''
            INSERT INTO TABLE FUNCTION postgresql('pg:5432', 'app', 'dashboard_totals', 'u', 'p')
            (id, total)
            SELECT 1, count() FROM events
        ''',
    )
"""
_TRUNCATE = """\
    PostgresOperator(task_id="empty", postgres_conn_id="pg", sql="TRUNCATE dashboard_totals") >> \\
"""


def test_insert_through_postgresql_function_after_a_truncate_is_information(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/x.py": _CLICKHOUSE.format(truncate=_TRUNCATE)})
    found, info = _rows(report, "IDEM002")
    assert found == []
    assert info == [12]
    assert "dashboard_totals" in next(f.message for f in report.information if f.rule == "IDEM002")


def test_insert_through_postgresql_function_names_its_table(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/x.py": _CLICKHOUSE.format(truncate="")})
    found, _ = _rows(report, "IDEM002")
    assert found == [11]
    assert "INSERT INTO dashboard_totals appends" in report.findings[0].message


def test_insert_into_s3_function_is_an_export(tmp_path: Path) -> None:
    dag = (
        _CLICKHOUSE.format(truncate="")
        .replace(
            "INSERT INTO TABLE FUNCTION postgresql('pg:5432', 'app', 'dashboard_totals', 'u', 'p')\n"
            "            (id, total)",
            "INSERT INTO FUNCTION s3('https://bucket.s3/exports/totals.parquet', 'Parquet')",
        )
        .replace("FROM events", "FROM events SETTINGS s3_truncate_on_insert = 1")
    )
    assert "s3(" in dag and "SETTINGS" in dag
    found, _ = _rows(lint_files(tmp_path, {"dags/x.py": dag}), "IDEM002")
    assert found == []


_ORACLE = """\
from datetime import datetime

from airflow import DAG
from airflow.providers.oracle.operators.oracle import OracleOperator

with DAG("o", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False) as dag:
    OracleOperator(task_id="rebuild", oracle_conn_id="ora", sql='''
    BEGIN
    {empty}
    INSERT INTO DWH.ANALOGUES (CODE, ANALOG) SELECT CODE, ANALOG FROM STG.ANALOGUES;
    COMMIT;
    END;
    ''')
"""


def test_execute_immediate_truncate_empties_the_target(tmp_path: Path) -> None:
    dag = _ORACLE.format(empty="EXECUTE IMMEDIATE 'TRUNCATE TABLE DWH.ANALOGUES';")
    found, _ = _rows(lint_files(tmp_path, {"dags/o.py": dag}), "IDEM002")
    assert found == []


def test_plsql_block_without_truncate_stays(tmp_path: Path) -> None:
    dag = _ORACLE.format(empty="EXECUTE IMMEDIATE 'ANALYZE TABLE STG.ANALOGUES COMPUTE STATISTICS';")
    found, _ = _rows(lint_files(tmp_path, {"dags/o.py": dag}), "IDEM002")
    assert found == [10]


def test_execute_immediate_truncate_of_another_table_stays(tmp_path: Path) -> None:
    dag = _ORACLE.format(empty="EXECUTE IMMEDIATE 'TRUNCATE TABLE STG.ANALOGUES_OLD';")
    found, _ = _rows(lint_files(tmp_path, {"dags/o.py": dag}), "IDEM002")
    assert found == [10]


def test_snapshot_keyed_by_date_but_stamped_with_now_stays(tmp_path: Path) -> None:
    # the corpus's c06: the DELETE matches the day, the INSERT writes now(): if the column keeps the
    # time, a same-day rerun's DELETE matches none of the first run's rows
    sql = _SNAPSHOT.format(where="").replace(
        "SELECT CURRENT_DATE AS snapshot_date", "SELECT now() AS snapshot_date"
    )
    found, _ = _rows(lint_files(tmp_path, {"dags/d.py": _sql_dag(sql)}), "IDEM001")
    assert found == [9]


_REBUILT = """\
{empty};
INSERT INTO rpt.sales_30d SELECT order_id, amount FROM ods.orders WHERE order_date >= CURRENT_DATE - 30;"""


def test_window_into_a_table_emptied_whole_is_information(tmp_path: Path) -> None:
    # catch-up on: no rolling window; the table holds only the latest run's span
    dag = _sql_dag(_REBUILT.format(empty="TRUNCATE rpt.sales_30d"), catchup="True")
    report = lint_files(tmp_path, {"dags/d.py": dag})
    found, info = _rows(report, "IDEM004")
    assert found == []
    assert info == [9]
    assert "which the task empties whole first" in report.information[0].message


def test_window_into_a_table_deleted_with_where_true_is_information(tmp_path: Path) -> None:
    dag = _sql_dag(_REBUILT.format(empty="DELETE FROM rpt.sales_30d WHERE 1=1"), catchup="True")
    found, info = _rows(lint_files(tmp_path, {"dags/d.py": dag}), "IDEM004")
    assert (found, info) == ([], [9])


def test_window_into_a_table_deleted_by_window_stays(tmp_path: Path) -> None:
    empty = "DELETE FROM rpt.sales_30d WHERE order_date >= CURRENT_DATE - 30"
    dag = _sql_dag(_REBUILT.format(empty=empty), catchup="True")
    found, _ = _rows(lint_files(tmp_path, {"dags/d.py": dag}), "IDEM004")
    assert found == [8]


_THROUGH_TEMP = """\
CREATE TEMP TABLE recent AS SELECT order_id, amount FROM ods.orders WHERE order_date >= CURRENT_DATE - 30;
{load}"""


def test_window_through_a_temp_table_into_a_rebuilt_table_is_information(tmp_path: Path) -> None:
    load = "TRUNCATE rpt.sales_30d;\nINSERT INTO rpt.sales_30d SELECT * FROM recent;"
    dag = _sql_dag(_THROUGH_TEMP.format(load=load), catchup="True")
    found, info = _rows(lint_files(tmp_path, {"dags/d.py": dag}), "IDEM004")
    assert (found, info) == ([], [8])


def test_window_through_a_temp_table_appended_stays(tmp_path: Path) -> None:
    dag = _sql_dag(_THROUGH_TEMP.format(load="INSERT INTO rpt.sales SELECT * FROM recent;"), catchup="True")
    found, _ = _rows(lint_files(tmp_path, {"dags/d.py": dag}), "IDEM004")
    assert found == [8]


_FACTORY = """\
import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator


def build_load_dag(dag_id, load_schedule_interval="0 6 * * *"):
    default_dag_args = {{"depends_on_past": False, "start_date": {start}, "retries": 5}}
    dag = DAG(dag_id, catchup=False, schedule_interval=load_schedule_interval, default_args=default_dag_args)
    BashOperator(task_id="load", bash_command="echo {{{{ ds }}}}", dag=dag)
    return dag
"""
_FACTORY_CALL = """\
# an Airflow DAG file
from factory import build_load_dag

DAG = build_load_dag(dag_id="load_dag")
"""


def test_clock_start_in_a_factory_default_args_is_read(tmp_path: Path) -> None:
    files = {
        "dags/factory.py": _FACTORY.format(start='pendulum.today(tz="UTC")'),
        "dags/load.py": _FACTORY_CALL,
    }
    report = lint_files(tmp_path, files)
    found = [(Path(f.file).name, f.line) for f in report.findings if f.rule == "IDEM003"]
    assert found == [("load.py", 4)]
    assert "in its DAG factory's arguments" in report.findings[0].message


def test_moot_clock_start_in_a_factory_default_args_is_information(tmp_path: Path) -> None:
    # yesterday's midnight on a daily cron with catchup=False: round 36i's moot start
    files = {
        "dags/factory.py": _FACTORY.format(start='pendulum.yesterday(tz="UTC")'),
        "dags/load.py": _FACTORY_CALL,
    }
    report = lint_files(tmp_path, files)
    assert [f for f in report.findings if f.rule == "IDEM003"] == []
    assert [Path(f.file).name for f in report.information if f.rule == "IDEM003"] == ["load.py"]

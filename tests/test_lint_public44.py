"""Round 33b (issue 35, lint44, docs/lint-evaluation.md): round 33's false findings, as small shapes.

A sensor class whose name only contains a service's letters (``GsnSqlSensor``) sends nothing; a
Vertica ``DROP_PARTITION`` before an insert clears the run's partition; ``db.schema.t`` and
``schema.t`` are one table; a clock read that only times a poll is no window, and catch-up counts
only clock reads that choose the data; one e-mail spelled at three places is one finding. The
guards keep the findings these rules must not lose (a real SNS operator, an append, two different
tables, a "last day" window).
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import explained, lint_files, seen_rows

_HEAD = """\
from datetime import datetime, timedelta

from airflow.sdk import DAG
"""

_SENSOR = """\
from airflow.sensors.base import BaseSensorOperator


class GsnSqlSensor(BaseSensorOperator):
    def __init__(self, sql, **kwargs):
        super().__init__(**kwargs)
        self.sql = sql

    def poke(self, context):
        return bool(self.hook.get_first(self.sql)[0])


class EmailArrivalCheck(BaseSensorOperator):
    def poke(self, context):
        return self.mailbox.has_new()
"""


def test_a_sensor_whose_name_holds_sns_inside_a_word_sends_nothing(tmp_path: Path) -> None:
    dag = _HEAD + (
        "from airflow.providers.amazon.aws.operators.sns import SnsPublishOperator\n"
        "from sensors import EmailArrivalCheck, GsnSqlSensor\n\n"
        "with DAG('kpi', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False,\n"
        "         default_args={'retries': 2}):\n"
        "    GsnSqlSensor(task_id='wait_data', sql='select count(*) > 0 from t')\n"
        "    EmailArrivalCheck(task_id='wait_mail')\n"
        "    SnsPublishOperator(task_id='notify', target_arn='arn', message='done')\n"
    )
    rows = seen_rows(lint_files(tmp_path, {"dags/kpi.py": dag, "dags/sensors.py": _SENSOR}))
    # the SNS operator (line 11) is the one sender: both sensors wait and send nothing
    assert [r for r in rows if r[0] == "IDEM006"] == [("IDEM006", "kpi.py", 11, "notify")]


_SQL_DAG = _HEAD + (
    "from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator\n\n"
    "with DAG('snap', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False,\n"
    "         template_searchpath=['sql']):\n"
    "    SQLExecuteQueryOperator(task_id='prepare', sql='prepare.sql', conn_id='vertica')\n"
)


def test_a_vertica_drop_partition_before_the_insert_makes_it_a_replace(tmp_path: Path) -> None:
    sql = (
        "select drop_partition('airflow.snapshot_main', '{{ ds }}');\n\n"
        "INSERT /*+ direct */ INTO airflow.snapshot_main\n"
        "SELECT user_id, '{{ ds }}' AS ds FROM users;\n"
    )
    rows = seen_rows(lint_files(tmp_path, {"dags/snap.py": _SQL_DAG, "dags/sql/prepare.sql": sql}))
    assert [r for r in rows if r[0] == "IDEM002"] == []


def test_guard_without_the_drop_the_insert_appends(tmp_path: Path) -> None:
    """Guard (passes on main too): the same insert alone, or after dropping another table's
    partition, is an append, at the INSERT's line."""
    sql = (
        "select drop_partition('airflow.snapshot_other', '{{ ds }}');\n\n"
        "INSERT /*+ direct */ INTO airflow.snapshot_main\n"
        "SELECT user_id, '{{ ds }}' AS ds FROM users;\n"
    )
    rows = seen_rows(lint_files(tmp_path, {"dags/snap.py": _SQL_DAG, "dags/sql/prepare.sql": sql}))
    assert [r for r in rows if r[0] == "IDEM002"] == [("IDEM002", "prepare.sql", 3, "prepare")]


_BACKUP = _HEAD + (
    "from airflow.providers.standard.operators.python import PythonOperator\n\n\n"
    "def backup():\n"
    "    connection = engine.connect()\n"
    '    connection.execute("delete from {deleted} where 1=1")\n'
    '    connection.execute("insert into {inserted} select * from dbo.balance")\n\n\n'
    "with DAG('escrow', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
    "    PythonOperator(task_id='backup', python_callable=backup)\n"
)


def test_a_database_qualified_delete_clears_the_schema_qualified_insert(tmp_path: Path) -> None:
    dag = _BACKUP.format(deleted="WTProperty.dbo.balance_backup", inserted="dbo.balance_backup")
    rows = seen_rows(lint_files(tmp_path, {"dags/escrow.py": dag}))
    assert [r for r in rows if r[0] == "IDEM002"] == []


def test_guard_names_that_disagree_on_a_part_are_two_tables(tmp_path: Path) -> None:
    """Guard (passes on main too): ``a.dbo.t`` and ``b.dbo.t``, or ``staging.t`` and ``dbo.t``, are
    different tables: the insert (line 10) still appends."""
    for deleted, inserted in (
        ("Archive.dbo.balance_backup", "Live.dbo.balance_backup"),
        ("staging.balance_backup", "dbo.balance_backup"),
    ):
        root = tmp_path / deleted.split(".")[0]
        rows = seen_rows(
            lint_files(root, {"dags/escrow.py": _BACKUP.format(deleted=deleted, inserted=inserted)})
        )
        assert [r for r in rows if r[0] == "IDEM002"] == [("IDEM002", "escrow.py", 10, "backup")]


_POLL = _HEAD + (
    "import requests\n"
    "from airflow.providers.standard.operators.python import PythonOperator\n\n\n"
    "def fetch(ds, **context):\n"
    "    timeout_sec = 20 * 60\n"
    "    wait_sec = 1\n"
    "    started_at = datetime.utcnow()\n"
    "    while not requests.get('https://api.example.com/ready', params={{'day': ds}}).json()['ready']:\n"
    "        started_at = started_at + timedelta(seconds=wait_sec)\n"
    "        if (datetime.utcnow() - started_at).total_seconds() > timeout_sec:\n"
    "            raise TimeoutError(ds)\n"
    "    hook.run('DELETE FROM stats WHERE day = %s', parameters=[ds])\n"
    "    hook.run('INSERT INTO stats SELECT * FROM staging WHERE day = %s', parameters=[ds])\n\n\n"
    "with DAG('stats', schedule='@daily', start_date=datetime(2024, 1, 1), catchup={catchup}):\n"
    "    PythonOperator(task_id='fetch', python_callable=fetch)\n"
)


def test_a_clock_read_that_only_times_a_poll_is_no_window(tmp_path: Path) -> None:
    rows = seen_rows(lint_files(tmp_path, {"dags/stats.py": _POLL.format(catchup="False")}))
    assert [r for r in rows if r[0] in ("IDEM003", "IDEM004")] == []


def test_catch_up_over_a_poll_timer_takes_each_run_s_window(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"dags/stats.py": _POLL.format(catchup="True")})
    assert [r for r in seen_rows(report) if r[0] == "IDEM005"] == []
    assert [i.rule for i in explained(report) if i.rule == "IDEM005"] == ["IDEM005"]


def test_guard_a_window_shifted_from_the_clock_stays_idem004(tmp_path: Path) -> None:
    """Guard (passes on main too): ``since = utcnow() - timedelta(days=1)`` handed to a query is
    "the last day" (IDEM004 at line 10), and catch-up over it stays IDEM005."""
    dag = _HEAD + (
        "from airflow.providers.standard.operators.python import PythonOperator\n\n\n"
        "def load():\n"
        "    since = datetime.utcnow() - timedelta(days=1)\n"
        "    hook.run('INSERT INTO stats SELECT * FROM events WHERE at > %s', parameters=[since])\n\n\n"
        "with DAG('stats', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=True):\n"
        "    PythonOperator(task_id='load', python_callable=load)\n"
    )
    rows = seen_rows(lint_files(tmp_path, {"dags/stats.py": dag}))
    assert ("IDEM004", "stats.py", 8, "load") in rows
    assert [r[0] for r in rows if r[0] == "IDEM005"] == ["IDEM005"]


def test_catch_up_over_random_row_ids_takes_each_run_s_window(tmp_path: Path) -> None:
    """Model scoring by ``ds`` whose rows get ``uuid4()`` ids: the ids choose no data, so
    ``catchup=True`` is information (main: IDEM005, "its tasks read the clock")."""
    dag = _HEAD + (
        "import uuid\n"
        "from airflow.providers.standard.operators.python import PythonOperator\n\n\n"
        "def score(ds, **context):\n"
        "    rows = [(uuid.uuid4().hex, ds, p) for p in predict(ds)]\n"
        "    hook.run('DELETE FROM scores WHERE ds = %s', parameters=[ds])\n"
        "    hook.insert_rows('scores', rows)\n\n\n"
        "with DAG('scores', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=True,\n"
        "         max_active_runs=4):\n"
        "    PythonOperator(task_id='score', python_callable=score)\n"
    )
    report = lint_files(tmp_path, {"dags/scores.py": dag})
    assert [r for r in seen_rows(report) if r[0] == "IDEM005"] == []
    assert [i.rule for i in explained(report) if i.rule == "IDEM005"] == ["IDEM005"]


_MAIL_OPERATOR = """\
import boto3
from airflow.models import BaseOperator


def send_email(to, subject, body):
    client = boto3.client("ses")
    client.send_email(Source="reports@example.com", Destination={"ToAddresses": to},
                      Message={"Subject": {"Data": subject}, "Body": {"Html": {"Data": body}}})


class EmailSQLResultsOperator(BaseOperator):
    def __init__(self, sql, to, **kwargs):
        super().__init__(**kwargs)
        self.sql, self.to = sql, to

    def execute(self, context):
        rows = self.hook.get_records(self.sql)
        send_email(self.to, "Partner report", str(rows))
"""


def test_one_email_spelled_at_three_places_is_one_finding(tmp_path: Path) -> None:
    dag = _HEAD + (
        "from mail_operator import EmailSQLResultsOperator\n\n"
        "with DAG('partners', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False,\n"
        "         default_args={'retries': 1}):\n"
        "    EmailSQLResultsOperator(task_id='mail', sql='select 1', to=['a@example.com'])\n"
    )
    files = {"dags/partners.py": dag, "dags/mail_operator.py": _MAIL_OPERATOR}
    rows = [r for r in seen_rows(lint_files(tmp_path, files)) if r[0] == "IDEM006"]
    # the SES call (mail_operator.py line 7) is the send; main also reports the operator's call
    # (partners.py line 8) and execute's call of the helper (line 18)
    assert rows == [("IDEM006", "mail_operator.py", 7, "mail")]


_ISSUES_OPERATOR = """\
from airflow.models import BaseOperator
from airflow.utils.email import send_email


class IssuesEmailOperator(BaseOperator):
    def execute(self, context):
        issues = self.hook.get_records("select id, title from issues where created = %s", [context["ds"]])
        for issue in issues:
            send_email(to="tickets@example.com", subject=issue[1], html_content=str(issue[0]))
        send_email(to="team@example.com", subject="summary", html_content=str(len(issues)))
"""


def test_two_sends_the_code_spells_stay_two_and_the_name_adds_none(tmp_path: Path) -> None:
    """An operator named for e-mail whose execute sends one e-mail per issue (line 9) and a summary
    (line 10): two findings, at those lines; the class name's guess (main's third, at the task's
    line 8) is one of them, not a third send."""
    dag = _HEAD + (
        "from issues_operator import IssuesEmailOperator\n\n"
        "with DAG('issues', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False,\n"
        "         default_args={'retries': 1}):\n"
        "    IssuesEmailOperator(task_id='mail_issues')\n"
    )
    files = {"dags/issues.py": dag, "dags/issues_operator.py": _ISSUES_OPERATOR}
    rows = [r for r in seen_rows(lint_files(tmp_path, files)) if r[0] == "IDEM006"]
    assert rows == [
        ("IDEM006", "issues_operator.py", 9, "mail_issues"),
        ("IDEM006", "issues_operator.py", 10, "mail_issues"),
    ]


def test_guard_a_clock_read_shifted_into_itself_then_compared_is_the_last_n_days(tmp_path: Path) -> None:
    """Guard (passes on main too): ``after = now(); after = after - timedelta(days=10)`` and files
    kept when modified after it is "the last 10 days" (IDEM004 at line 9), not a poll timer."""
    dag = _HEAD + (
        "from airflow.sdk import task\n\n\n"
        "@task\n"
        "def pick(files):\n"
        "    after = datetime.now()\n"
        "    after = after - timedelta(days=10)\n"
        "    return [f for f in files if f.modified > after]\n\n\n"
        "with DAG('files', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    pick(['a'])\n"
    )
    rows = seen_rows(lint_files(tmp_path, {"dags/files.py": dag}))
    assert [r for r in rows if r[0] in ("IDEM003", "IDEM004")] == [("IDEM004", "files.py", 9, "pick")]

"""The linter's round-12 changes (issue 35, docs/lint-evaluation.md): each a principle stated once in
the module that owns it, tested with a few hand-written lines. What each test asserts is what a
reviewer would say of the snippet, worked out by hand (never read from the linter's tables):

- a task whose only send is a chat notice answers "If this runs twice?" with what happens (a second
  copy of the message in the channel, no data changes), not "sends again .. key it first" (answers);
- a custom operator runs, for a task built with a literal argument, only the ``execute`` branch
  that value selects; a non-literal argument keeps every branch (dispatch);
- a GraphQL query, a POST to a search or report endpoint, boto3's ``Object.put(Body=..)`` and a PUT
  to a presigned URL send nothing twice; an order POST, an internal PUT and a mutation do (reads).
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import LintReport, RuleFinding, lint_paths
from tests.lintfiles import per_task, seen


def _lint(tmp_path: Path, files: dict[str, str]) -> LintReport:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return lint_paths([tmp_path])


def _at(entries: list[RuleFinding], rule: str) -> list[tuple[int, str | None]]:
    """(line, task) of the entries of `rule` (findings or information), sorted."""
    return sorted((f.line, f.task_id) for f in per_task(entries) if f.rule == rule)


_CHAT = """from datetime import datetime
import requests
from airflow.decorators import dag, task
from airflow.providers.slack.operators.slack_webhook import SlackWebhookOperator

CHAT = "https://chat.googleapis.com/v1/spaces/X/messages?key=k"


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 2})
def reports():
    @task
    def chat_summary(ds=None):
        requests.post(CHAT, json={"text": f"loaded {ds}"})

    SlackWebhookOperator(task_id="ping", slack_webhook_conn_id="s", message="done")

    @task
    def order(ds=None):
        requests.post("https://api.example.com/orders", json={"day": ds})

    chat_summary()
    order()


reports()
"""


def test_a_chat_notice_answers_what_a_second_run_does(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"chat.py": _CHAT})
    answers = {t.task_id: t for t in report.tasks}
    # the two notices are information (round 11), the order POST a finding
    assert _at(report.information, "IDEM006") == [(13, "chat_summary"), (15, "ping")]
    assert _at(report.findings, "IDEM006") == [(19, "order")]
    for task_id in ("chat_summary", "ping"):
        said = answers[task_id].runs_twice
        assert said.startswith("Posts the message again:"), said
        assert "second copy" in said and "key it" not in said and "Sends again" not in said
        backfill = answers[task_id].backfill
        assert "one chat message of its own" in backfill and "key" not in backfill, backfill
    assert answers["order"].runs_twice.startswith("Sends again: an HTTP POST")
    assert answers["order"].backfill.endswith("again; key it first.")


_DISPATCH = """from datetime import datetime, timedelta
from airflow import DAG
from airflow.models import BaseOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook


class TableOperator(BaseOperator):
    def __init__(self, mode, table, kind="full", **kwargs):
        super().__init__(**kwargs)
        self.how = mode
        self.table = table
        self.kind = kind

    def execute(self, context):
        hook = PostgresHook("dwh")
        if self.how == "append":
            hook.run("INSERT INTO sales_log SELECT * FROM staging_sales")
        elif self.how in ("recent", "latest"):
            since = datetime.now() - timedelta(days=3)
            hook.run("DELETE FROM sales_recent WHERE day >= %s", parameters=(since,))
        else:
            self.replace(context)
        if self.kind != "full":
            hook.run("INSERT INTO sales_audit SELECT * FROM staging_sales")

    def replace(self, context):
        PostgresHook("dwh").run("TRUNCATE sales_copy; INSERT INTO sales_copy SELECT * FROM staging_sales")


MODE = pick_mode()

with DAG("sales", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    TableOperator(task_id="copy", mode="replace", table="sales_copy")
    TableOperator(task_id="log", mode="append", table="sales_log")
    TableOperator(task_id="recent", mode="latest", table="sales_recent", kind="partial")
    TableOperator(task_id="unknown", mode=MODE, table="x")
"""


def test_a_custom_operator_runs_only_the_branch_its_literal_argument_selects(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"sales.py": _DISPATCH})
    # by hand: copy (mode "replace") runs only the else branch, replace(): TRUNCATE + INSERT, nothing to
    # report; log ("append") appends to sales_log (line 17); recent ("latest" is in the tuple) reads a
    # 3-day window from the clock (line 19) and, kind "partial" != "full", appends to sales_audit
    # (line 24); unknown (mode not a literal) may run any branch, so both appends and the window stay
    assert _at(report.findings, "IDEM002") == [(17, "log"), (17, "unknown"), (24, "recent")]
    assert _at(report.findings, "IDEM004") == [(19, "recent"), (19, "unknown")]


_REQUESTS = """from datetime import datetime
import boto3
import requests
from airflow.decorators import dag, task

SHOP = "https://shop.example.com/admin/api/2024-01/graphql.json"
ORDERS_QUERY = "query { orders(first: 10) { edges { node { id } } } }"


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 2})
def pulls():
    @task
    def orders(ds=None):
        payload = {"query": ORDERS_QUERY}
        return requests.post(SHOP, json=payload).json()

    @task
    def search(ds=None):
        return requests.post("https://es.example.com/events/_search", json={"size": 10}).json()

    @task
    def report(ds=None):
        url = "https://api.example.com/v5/reports/campaigns"
        return requests.post(url, json={"startTime": ds}).json()

    @task
    def save(ds=None):
        boto3.resource("s3").Object("bucket", f"raw/{ds}.csv").put(Body=b"x")

    @task
    def upload(ds=None):
        s3 = boto3.client("s3")
        target = s3.generate_presigned_url("put_object", Params={"Bucket": "b", "Key": f"{ds}.csv"})
        requests.put(target, data=b"x")

    @task
    def create_order(ds=None):
        requests.post("https://api.example.com/v1/orders", json={"day": ds})

    @task
    def refresh(ds=None):
        requests.put("https://internal.example.com/inner/positions/init", json={"day": ds})

    orders()
    search()
    report()
    save()
    upload()
    create_order()
    refresh()


pulls()
"""

_MUTATION = """from datetime import datetime
import requests
from airflow.decorators import dag, task

SHOP = "https://shop.example.com/admin/api/2024-01/graphql.json"
TAG = "mutation { tagsAdd(id: 1, tags: [\\"x\\"]) { userErrors { message } } }"


@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False, default_args={"retries": 2})
def tags():
    @task
    def add_tag(ds=None):
        requests.post(SHOP, json={"query": TAG})

    add_tag()


tags()
"""


def test_reads_sent_by_post_and_whole_object_puts_are_no_sends(tmp_path: Path) -> None:
    report = _lint(tmp_path, {"pulls.py": _REQUESTS, "tags.py": _MUTATION})
    # by hand: the GraphQL query (no mutation in its module), the _search and the reports POSTs read;
    # the S3 Object.put and the PUT to a presigned URL write the same object at the same key. The
    # order POST, the internal PUT and the GraphQL mutation (tags.py) are sends a retry repeats.
    found = [(f.file.rsplit("/", 1)[-1], f.line, f.task_id) for f in seen(report) if f.rule == "IDEM006"]
    assert sorted(found) == [
        ("pulls.py", 38, "create_order"),
        ("pulls.py", 42, "refresh"),
        ("tags.py", 13, "add_tag"),
    ]

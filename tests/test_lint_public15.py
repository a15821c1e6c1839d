"""The linter's round-15 changes (issue 35, docs/lint-evaluation.md), each tested with a few
hand-written lines; what each test asserts is what a reviewer would say of the snippet, worked out
by hand (never read from the linter's tables):

- objects of the repository's own classes (`instances`): ``obj.method()`` runs the method of the
  class the code names, with ``self`` that object; a class chosen at run time (an argument kept in
  an attribute, a ``PythonOperator``'s ``op_kwargs``, a dict of classes) is followed to the class
  given; a subclass's override runs; ``cursor.executemany("INSERT ..")`` is SQL the task sends;
- packages of the DAGs folder imported by a DAG file nested further down (`source.module_path`);
- ``DAG(.., **dag_args)`` takes ``dag_args``' entries as arguments (`dagargs`); a schedule read
  from what the linter cannot see is any schedule, not none (`schedule.unknown_schedule`);
- calling a ``@task`` function imported from another module, in a DAG body, builds a task: no code
  of it runs at parse time.
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import RuleFinding
from tests.lintfiles import lint_files


def _at(entries: list[RuleFinding], rule: str) -> list[tuple[str, int, str | None]]:
    return sorted((Path(f.file).name, f.line, f.task_id) for f in entries if f.rule == rule)


_METRICS = (
    "class Metric:\n"  # 1
    "    def __init__(self, conn, owner):\n"
    "        self.conn = conn\n"
    "        self.owner = owner\n"
    "    def insert_rows(self, query, rows):\n"  # 5
    "        cur = self.conn.cursor()\n"
    "        cur.executemany(query, rows)\n"
    "    def save(self):\n"
    "        pass\n"
    "    def run_once(self):\n"  # 10
    "        self.save()\n"
    "class Commits(Metric):\n"
    "    def save(self):\n"
    "        q = 'INSERT INTO commit_metrics (owner, n) VALUES (%s, %s)'\n"  # 14
    "        self.insert_rows(q, [(self.owner, 1)])\n"
    "class Reviews(Metric):\n"
    "    def save(self):\n"
    "        q = 'INSERT INTO review_metrics (owner, n) VALUES (%s, %s)'\n"  # 18
    "        self.insert_rows(q, [(self.owner, 2)])\n"
    "class Group:\n"  # 20
    "    def __init__(self, metric_class, owners):\n"
    "        self.metric_class = metric_class\n"
    "        self.owners = owners\n"
    "    def routine(self):\n"
    "        for owner in self.owners:\n"  # 25
    "            calc = self.metric_class(None, owner)\n"
    "            calc.run_once()\n"
)

_DAG_HEAD = (
    "from datetime import datetime\n"
    "from airflow.providers.standard.operators.python import PythonOperator\n"
    "from airflow.sdk import DAG\n"
)


def test_class_chosen_by_op_kwargs_runs_its_own_override(tmp_path: Path) -> None:
    # each task passes one class through op_kwargs; Group keeps it in an attribute and makes one per
    # owner; Metric.run_once calls self.save(), the subclass's, whose INSERT goes through
    # executemany in the base class: each task appends its own table (and not the other's)
    dag = _DAG_HEAD + (
        "from metrics.lib import Commits, Reviews, Group\n"
        "def calculate(metric):\n"
        "    Group(metric, ['a', 'b']).routine()\n"
        "with DAG('m', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    for cls, name in [(Commits, 'commits'), (Reviews, 'reviews')]:\n"
        "        PythonOperator(task_id=f'calc_{name}', python_callable=calculate,\n"
        "                       op_kwargs={'metric': cls})\n"
    )
    report = lint_files(tmp_path, {"metrics/__init__.py": "", "metrics/lib.py": _METRICS, "dag.py": dag})
    assert _at(report.findings, "IDEM002") == [("lib.py", 14, "calc_commits"), ("lib.py", 18, "calc_reviews")]


def test_class_picked_from_a_dict_of_classes(tmp_path: Path) -> None:
    dag = _DAG_HEAD + (
        "from metrics.lib import Commits, Reviews\n"
        "CLASSES = {'commits': Commits, 'reviews': Reviews}\n"
        "def calculate():\n"
        "    calc = CLASSES['reviews'](None, 'a')\n"
        "    calc.run_once()\n"
        "with DAG('m', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    PythonOperator(task_id='calc', python_callable=calculate)\n"
    )
    report = lint_files(tmp_path, {"metrics/__init__.py": "", "metrics/lib.py": _METRICS, "dag.py": dag})
    assert _at(report.findings, "IDEM002") == [("lib.py", 18, "calc")]


def test_a_receiver_of_unknown_class_is_not_followed(tmp_path: Path) -> None:
    # the class comes from a parameter nothing binds: no method is guessed
    dag = _DAG_HEAD + (
        "from metrics.lib import Group\n"
        "def calculate(metric):\n"
        "    Group(metric, ['a']).routine()\n"
        "with DAG('m', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    PythonOperator(task_id='calc', python_callable=calculate)\n"
    )
    report = lint_files(tmp_path, {"metrics/__init__.py": "", "metrics/lib.py": _METRICS, "dag.py": dag})
    assert _at(report.findings, "IDEM002") == []


def test_package_of_the_dags_folder_imported_from_a_nested_dag_file(tmp_path: Path) -> None:
    # dags/team/jobs/daily/load.py imports team.lib.store from dags/ (Airflow puts the DAGs folder on
    # the path): three folders up from the DAG file, beyond the two looked in before
    store = (
        "class Store:\n"
        "    def __init__(self, client):\n"
        "        self.client = client\n"
        "    def save(self, rows):\n"
        "        self.client.execute('INSERT INTO events (id, at) VALUES (%s, %s)', rows)\n"  # 5
    )
    dag = _DAG_HEAD + (
        "from team.lib.store import Store\n"
        "def load():\n"
        "    Store(None).save([(1, 2)])\n"
        "with DAG('load', schedule='@daily', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    PythonOperator(task_id='load', python_callable=load)\n"
    )
    files = {
        "dags/team/__init__.py": "",
        "dags/team/lib/__init__.py": "",
        "dags/team/lib/store.py": store,
        "dags/team/jobs/daily/load.py": dag,
    }
    report = lint_files(tmp_path, files)
    assert _at(report.findings, "IDEM002") == [("store.py", 5, "load")]


_FACTORY = (
    "import pendulum\n"
    "from airflow.sdk import DAG\n"
    "from airflow.providers.standard.operators.empty import EmptyOperator\n"
    "dag_args = {'start_date': pendulum.today('UTC').add(days=-1), 'catchup': False}\n"  # 4
    "def make_dag(dag_id, config={}):\n"
    "    with DAG(dag_id, schedule=config.get('schedule'), **dag_args) as dag:\n"
    "        EmptyOperator(task_id='start')\n"
    "    return dag\n"
    "make_dag('discover')\n"
)


def test_factory_dag_args_start_date_with_a_schedule_from_config(tmp_path: Path) -> None:
    # the schedule comes from each config (a weekly one's first window never comes due when the
    # start moves every day): the moving start_date in **dag_args is the DAG's, reported
    report = lint_files(tmp_path, {"factory.py": _FACTORY})
    assert [(f.rule, f.line) for f in report.findings] == [("IDEM003", 4)]


def test_dag_args_start_date_on_a_hand_triggered_dag_is_information(tmp_path: Path) -> None:
    # schedule None comes from the same **dag_args: the moving start creates no windows
    text = (
        "import pendulum\n"
        "from airflow.sdk import DAG\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "dag_args = {'start_date': pendulum.today('UTC').add(days=-1), 'schedule': None}\n"  # 4
        "with DAG('manual', **dag_args):\n"
        "    EmptyOperator(task_id='start')\n"
    )
    report = lint_files(tmp_path, {"manual.py": text})
    assert _at(report.findings, "IDEM003") == []
    assert _at(report.information, "IDEM003") == [("manual.py", 4, None)]


def test_imported_task_function_called_in_a_dag_body_is_no_parse_time_code(tmp_path: Path) -> None:
    group = (
        "import uuid\n"
        "from airflow.sdk import task\n"
        "@task\n"
        "def files_to_process(payload):\n"
        "    return [{'run_id': str(uuid.uuid4()), **p} for p in payload]\n"
        "@task\n"
        "def ingest(event):\n"
        "    return event\n"
    )
    dag = (
        "from datetime import datetime\n"
        "from airflow.sdk import DAG\n"
        "from pipeline.groups import files_to_process, ingest\n"
        "with DAG('ingest', schedule=None, start_date=datetime(2024, 1, 1)):\n"
        "    files = files_to_process(payload=[{'a': 1}])\n"  # 5: builds a task
        "    ingest.expand(event=files)\n"  # its output feeds mapped tasks
    )
    report = lint_files(tmp_path, {"pipeline/__init__.py": "", "pipeline/groups.py": group, "ingest.py": dag})
    module_level = [f for f in report.findings if f.file.endswith("ingest.py") and f.task_id is None]
    assert module_level == []


def test_sql_kept_as_a_class_attribute(tmp_path: Path) -> None:
    # the INSERT is a class attribute, read through the class's name in the method that sends it
    lib = (
        "class Network:\n"
        "    insert_sql = '''\n"
        "    INSERT INTO network_metrics (repo, month, nodes) VALUES (%s, %s, %s)'''\n"  # 3
        "    def __init__(self, conn):\n"
        "        self.conn = conn\n"
        "    def save(self, rows):\n"
        "        self.conn.cursor().executemany(Network.insert_sql, rows)\n"
    )
    dag = _DAG_HEAD + (
        "from metrics.net import Network\n"
        "def calculate():\n"
        "    Network(None).save([('r', '2024-01', 3)])\n"
        "with DAG('n', schedule='@monthly', start_date=datetime(2024, 1, 1), catchup=False):\n"
        "    PythonOperator(task_id='network', python_callable=calculate)\n"
    )
    report = lint_files(tmp_path, {"metrics/__init__.py": "", "metrics/net.py": lib, "dag.py": dag})
    assert [(name, task) for name, _, task in _at(report.findings, "IDEM002")] == [("net.py", "network")]
    assert 2 <= report.findings[0].line <= 3

"""Round 20b after lint22 (issue 35, docs/lint-evaluation.md): two recall holes of the held-out batch,
tested with small projects of hand-written files. What each test asserts is what a reviewer reading
the files would say.

- blockchain-etl's DAG files call a factory of the repository (``DAG = build_export_dag(..)``) that
  creates ``DAG(..)`` and every operator in its body: the linter collected 0 tasks in 21 files. The
  tasks a factory creates (``dag=`` of its DAG, in its ``with DAG(..)`` block, or through a helper
  defined in its body) are the calling file's DAG's tasks, so the rules judge them.
- rialto-airflow's ORCID stats task inserts through SQLAlchemy Core (``insert(Model).values(..)``)
  into a table numbered by an auto-increment id under no other key: a rerun adds a second row, which
  the linter did not read as an insert. Core inserts and ORM ``session.add(Model(..))`` of the
  repository's models are appends (IDEM002) unless a key decides: a declared unique key the written
  columns carry (a rerun fails), ``on_conflict_do_update``/``do_nothing``, ``session.merge``, or an add
  only when a lookup of the model found nothing (get or create).
"""

from __future__ import annotations

from pathlib import Path

from airflow_idempotent.lint import lint_paths

_FACTORY = """\
from datetime import datetime

from airflow import models
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator


def build_load_dag(dag_id, table, schedule="@daily"):
    dag = models.DAG(dag_id, catchup=False, schedule=schedule, start_date=datetime(2018, 7, 1))

    def add_load_task(task_id, sql):
        return SQLExecuteQueryOperator(task_id=task_id, conn_id="dwh", sql=sql, dag=dag)

    SQLExecuteQueryOperator(
        task_id="append_events",
        conn_id="dwh",
        sql=f"INSERT INTO {table} SELECT * FROM staging_events",
        dag=dag,
    )
    add_load_task("replace_day", "DELETE FROM daily WHERE d = '{{ ds }}'; INSERT INTO daily SELECT 1")
    add_load_task("append_audit", "INSERT INTO audit_log (n) SELECT count(*) FROM staging_events")
    return dag


def build_with_dag(dag_id):
    with models.DAG(dag_id, catchup=False, schedule="@daily", start_date=datetime(2018, 7, 1)) as dag:
        SQLExecuteQueryOperator(task_id="append_rows", conn_id="dwh", sql="INSERT INTO rows_log SELECT 1")
    return dag
"""

_DAGS = {
    "load_events.py": "from factories.build import build_load_dag\n\n"
    "DAG = build_load_dag('load_events', 'events')  # airflow DAG\n",
    "load_rows.py": "from factories.build import build_with_dag\n\n"
    "DAG = build_with_dag('load_rows')  # airflow DAG\n",
}


def _project(tmp_path: Path) -> list[tuple[str, int, str | None, str | None]]:
    (tmp_path / "factories").mkdir()
    (tmp_path / "factories" / "__init__.py").write_text("")
    (tmp_path / "factories" / "build.py").write_text(_FACTORY)
    (tmp_path / "dags").mkdir()
    for name, text in _DAGS.items():
        (tmp_path / "dags" / name).write_text(text)
    report = lint_paths([tmp_path])
    return sorted(
        (Path(f.file).name, f.line, f.dag_id, f.task_id) for f in report.findings if f.rule == "IDEM002"
    )


def test_tasks_a_dag_factory_creates_are_the_calling_dags_tasks(tmp_path: Path) -> None:
    # build.py's appends without a key, at the INSERT's line: `append_events` (line 16, into `events`,
    # the call's table), `append_audit` made by the helper (its SQL at line 20); `replace_day` deletes
    # its day first (no finding); `append_rows` in the factory's `with DAG(..)` block (line 26)
    assert _project(tmp_path) == [
        ("build.py", 16, "load_events", "append_events"),
        ("build.py", 20, "load_events", "append_audit"),
        ("build.py", 26, "load_rows", "append_rows"),
    ]


_MODELS = """\
from sqlalchemy import Column, Integer, MetaData, String, Table, UniqueConstraint
from sqlalchemy.orm import Mapped, declarative_base, mapped_column

Base = declarative_base()
metadata = MetaData()


class Stats(Base):
    __tablename__ = "stats"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    date_label: Mapped[str] = mapped_column(String)
    count: Mapped[int] = mapped_column(Integer)


class Daily(Base):
    __tablename__ = "daily"
    __table_args__ = (UniqueConstraint("day", "source"),)

    id = Column(Integer, primary_key=True)
    day = Column(String)
    source = Column(String)


audit = Table("audit", metadata, Column("id", Integer, primary_key=True), Column("msg", String))
"""

_ORM_DAG = """\
from datetime import datetime

from airflow.sdk import dag, task
from sqlalchemy import insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from models import Daily, Stats, audit

ENGINE = None


@dag(schedule="@weekly", start_date=datetime(2024, 1, 1), catchup=False)
def reports():
    @task
    def append_stats():
        row = {"date_label": "{{ ds }}", "count": 3}
        with Session(ENGINE) as session:
            session.execute(insert(Stats).values(**row))
            session.commit()

    @task
    def keyed_daily():
        with Session(ENGINE) as session:
            session.execute(insert(Daily).values(day="2024-01-01", source="a"))
            session.commit()

    @task
    def upsert_stats():
        with Session(ENGINE) as session:
            stmt = pg_insert(Stats).values(id=1, date_label="x", count=1)
            session.execute(stmt.on_conflict_do_update(index_elements=["id"], set_={"count": 1}))
            session.commit()

    @task
    def add_stats():
        with Session(ENGINE) as session:
            session.add(Stats(date_label="x", count=2))
            session.commit()

    @task
    def merge_stats():
        with Session(ENGINE) as session:
            session.merge(Stats(id=7, date_label="x", count=2))
            session.commit()

    @task
    def get_or_create():
        with Session(ENGINE) as session:
            found = session.execute(select(Stats).where(Stats.date_label == "x")).first()
            if found is None:
                session.add(Stats(date_label="x", count=2))
            session.commit()

    @task
    def append_audit():
        with Session(ENGINE) as session:
            session.execute(insert(audit).values(msg="ran"))
            session.commit()

    append_stats() >> keyed_daily() >> upsert_stats() >> add_stats()
    merge_stats() >> get_or_create() >> append_audit()


reports()
"""


def test_sqlalchemy_inserts_and_orm_adds_feed_the_append_rule(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(_MODELS)
    (tmp_path / "reports.py").write_text(_ORM_DAG)
    report = lint_paths([tmp_path])
    assert any(f.endswith("reports.py") for f in report.files), report.files  # not vacuous
    found = sorted((f.line, f.task_id) for f in report.findings if f.rule == "IDEM002")
    # appends with no key: Stats' id is numbered by the database (lines 19 and 38), audit's lone
    # Integer primary key too (line 58); keyed_daily writes Daily's unique (day, source): a rerun fails
    # on the key; upsert_stats, merge_stats and get_or_create write by key
    assert found == [(19, "append_stats"), (38, "add_stats"), (58, "append_audit")]

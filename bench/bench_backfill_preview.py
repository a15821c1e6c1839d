#!/usr/bin/env python
"""Backfill preview benchmark: the largest range the UI's preview evaluates (`MAX_PREVIEW` windows).

Run on demand (it is not a test): ``python bench/bench_backfill_preview.py [--repeat R]`` from the
repository root with the project's venv; it writes bench/results/backfill_preview.md. Goal: under 2 s.

A throw-away AIRFLOW_HOME (SQLite metadata, migrated), one guarded daily DAG (cap 31) synced as the
DAG processor syncs it, and every other day of the range already run (so the preview looks up real
runs). Then R times: the plugin's `preview` (what `POST .../backfills/preview` answers) of
`MAX_PREVIEW` windows, and the count of statements it sent to the metadata database.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "backfill_preview.md"
DAG_ID = "bench_preview_guarded"
DAG_FILE = textwrap.dedent(
    f"""
    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG
    from airflow_idempotent.guard import GuardConfig

    with DAG({DAG_ID!r}, schedule="@daily", start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
             catchup=False, params=GuardConfig(cap=31, measures=["amount_eur"]).param()):
        EmptyOperator(task_id="noop")
    """
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="idem_bench_preview_") as home:
        os.environ.update(
            {
                "AIRFLOW_HOME": home,
                "AIRFLOW__CORE__DAGS_FOLDER": str(Path(home) / "dags"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            }
        )
        (Path(home) / "dags").mkdir()
        (Path(home) / "dags" / "bench.py").write_text(DAG_FILE)
        airflow = str(Path(sys.executable).with_name("airflow"))
        subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, timeout=600)
        return run(args, home)


def run(args: argparse.Namespace, home: str) -> int:
    import sqlalchemy as sa
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import event

    from airflow_idempotent.history.store import HistoryStore
    from airflow_idempotent.plugins.ui.backfills import MAX_PREVIEW, preview
    from airflow_idempotent.plugins.ui.datamodels import BackfillForm
    from airflow_idempotent.plugins.ui.dependencies import load_dag

    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(dag_folder=str(Path(home) / "dags"), bundle_name="dags-folder")
    sync_bag_to_db(bag, "dags-folder", None)
    first = dt.datetime(2022, 1, 1, tzinfo=dt.timezone.utc)
    last = first + dt.timedelta(days=MAX_PREVIEW - 1)
    with create_session() as session:
        dag = load_dag(session, DAG_ID)
        for i in range(0, MAX_PREVIEW, 2):  # every other window already ran
            day = first + dt.timedelta(days=i)
            session.add(
                DagRun(
                    dag_id=DAG_ID,
                    run_id=f"manual__{day.isoformat()}",
                    logical_date=day,
                    data_interval=(day, day),
                    run_after=day,
                    run_type="manual",
                    state="success",
                    triggered_by=None,
                )
            )
    store = HistoryStore(sa.create_engine(f"sqlite:///{home}/history.db"))
    store.migrate()
    form = BackfillForm.model_validate(
        {
            "from_date": first.date().isoformat(),
            "to_date": last.date().isoformat(),
            "semantics": "replay",
            "reason": "benchmark",
        }
    )
    statements: list[str] = []
    from airflow import settings

    event.listen(settings.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    seconds: list[float] = []
    answer: dict = {}
    for _ in range(args.repeat):
        statements.clear()
        with create_session() as session:
            dag = load_dag(session, DAG_ID)
            started = time.perf_counter()
            answer = preview(session, store, dag, form)
            seconds.append(time.perf_counter() - started)
    assert answer["total_in_range"] == MAX_PREVIEW, answer["total_in_range"]
    assert answer["runs"] == MAX_PREVIEW // 2, answer["runs"]  # the windows without a run
    lines = [
        "# Backfill preview of the largest allowed range",
        "",
        f"- measured: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {platform.node()}, "
        f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}; load average "
        f"{os.getloadavg()[0]:.1f} (other work shared the CPUs)",
        f"- range: {MAX_PREVIEW} daily windows (MAX_PREVIEW), {MAX_PREVIEW // 2} already run; "
        "SQLite metadata; the plugin's `preview` called directly (no HTTP)",
        f"- statements sent to the metadata database per preview: {len(statements)}",
        f"- seconds over {args.repeat} runs: median {statistics.median(seconds):.3f}, "
        f"min {min(seconds):.3f}, max {max(seconds):.3f} (goal: under 2 s)",
        "",
    ]
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

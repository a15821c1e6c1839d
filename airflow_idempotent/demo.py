"""The demo: the payout that ran twice, through real Airflow, on an embedded DuckDB warehouse.

`airflow-idempotent demo` (`make demo` in a clone, `python -m airflow_idempotent.demo`) prepares a
throwaway Airflow home and a DuckDB file, loads a month of sales, leaves what a crashed writer
left on 25 August (1,247 of 2,000 payouts), then reruns each payouts DAG twice as `airflow dags test`
does (`DAG.test()`) and prints the window's rows and total after every step. No server is needed.
The six runs share one Airflow process: each `airflow dags test` would import Airflow and build its
in-process execution API again (7-8 s of its 11-16 s on a 2-core machine, the task itself < 1 s).

The DAGs it runs are the package's `demo_dags/payouts.py` (package data; the repository's
`dags/payouts.py` is a link to it), so the demo runs from an installed wheel as well as from a
clone. It needs the `duckdb` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from datetime import time as dtime
from decimal import Decimal
from pathlib import Path
from typing import TextIO

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from airflow_idempotent.examples.payouts import create_payouts, create_sales, simulate_crash, window_totals

DAY = date(2026, 8, 25)
#: The demo's DAG folder, shipped in the package (dags/payouts.py in the repository links here).
DEMO_DAGS = Path(__file__).resolve().parent / "demo_dags"
#: What the demo needs beyond the package's own requirements, and the extra that installs it.
DUCKDB_MODULES = ("duckdb", "duckdb_engine")
DUCKDB_INSTALL = "pip install 'airflow-idempotent[duckdb]'"
#: (DAG, table it writes)
DAGS = (
    ("payouts_overwrite", "payouts"),
    ("payouts_merge", "payouts"),
    ("payouts_append_naive", "payouts_naive"),
)


def _airflow() -> str:
    return str(Path(sys.executable).with_name("airflow"))


def _env(home: Path, warehouse: Path, dags: Path) -> dict[str, str]:
    """The demo's own Airflow: none of the caller's Airflow settings, connections or config file
    (an `AIRFLOW__DATABASE__SQL_ALCHEMY_CONN` in the shell would have the demo migrate and run in
    that metadata database, and find DAGs registered there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_WAREHOUSE": json.dumps({"conn_type": "duckdb", "host": str(warehouse)}),
        }
    )
    return env


def _run(cmd: list[str], env: dict[str, str], log: Path) -> float:
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        sys.exit(f"'{' '.join(cmd)}' failed with exit code {done.returncode}: see {log}")
    return time.monotonic() - started


def _reset_to_crash(engine: sa.Engine, table: str) -> None:
    """Start each DAG's story from the same crash: the day's first 1,247 payouts, committed."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"DELETE FROM {table} WHERE sale_date >= :d AND sale_date < :e"),  # table is a constant
            {"d": DAY, "e": DAY + timedelta(days=1)},
        )
    simulate_crash(engine, DAY, rows=1247, table=table)


#: The child process that runs the DAGs: Airflow reads its configuration from the environment
#: `_env` sets when it is first imported, so the runs cannot share the CLI's own process.
RUNS = "import sys; from airflow_idempotent.demo import run_dags; sys.exit(run_dags(sys.argv[1]))"


def run_dags(warehouse: str) -> int:
    """Each DAG from the crash, then run twice as `airflow dags test` runs it, printing a row per step.

    Airflow writes its run logs to stdout: they go to stderr (the demo's log) and only the table
    goes to stdout, flushed row by row so the demo's reader sees each step as it ends.
    """
    table_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    from airflow.dag_processing.dagbag import DagBag  # after the environment is set: it reads the config

    dagbag = DagBag()
    missing = [dag_id for dag_id, _ in DAGS if dag_id not in dagbag.dags]  # the folder's, not the DB's
    if missing:
        print(
            f"the demo's DAGs {missing} did not load: {dagbag.import_errors or 'not in the folder'}",
            file=sys.stderr,
        )
        return 2
    engine = sa.create_engine(f"duckdb:///{warehouse}", poolclass=NullPool)
    failed = []
    for dag_id, table in DAGS:
        _reset_to_crash(engine, table)
        count, total = window_totals(engine, table, DAY)
        _print_row((dag_id, "crash (1,247 of 2,000)", count, total, 0.0), table_out)
        for attempt in (1, 2):
            started = time.monotonic()
            run = dagbag.dags[dag_id].test(logical_date=datetime.combine(DAY, dtime(), timezone.utc))
            seconds = time.monotonic() - started
            if run.state != "success":
                failed.append(f"{dag_id} rerun {attempt}: {run.state}")
            count, total = window_totals(engine, table, DAY)
            _print_row((dag_id, f"rerun {attempt}", count, total, seconds), table_out)
    engine.dispose()
    for what in failed:
        print(f"run failed: {what}", file=sys.stderr)
    return 1 if failed else 0


def missing_duckdb() -> str | None:
    """The error to show when the duckdb extra is not installed, else None."""
    import importlib.util

    absent = [name for name in DUCKDB_MODULES if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return (
        f"the demo's warehouse is DuckDB, and {', '.join(absent)} is not installed: "
        f"{DUCKDB_INSTALL} (the duckdb extra), then run the demo again."
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options (shared by `python -m airflow_idempotent.demo` and `airflow-idempotent demo`)."""
    parser.add_argument(
        "--dir", default=".demo", help="throwaway folder for the Airflow home and the warehouse"
    )
    parser.add_argument("--dags", default=str(DEMO_DAGS), help="folder holding the demo's payouts.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the demo; exits with a message naming the fix when the duckdb extra or the DAGs are missing."""
    problem = missing_duckdb()
    if problem:
        sys.exit(problem)
    root = Path(args.dir).resolve()
    dags = Path(args.dags).resolve()
    if not (dags / "payouts.py").exists():
        sys.exit(f"no payouts.py in {dags}: pass --dags with the folder holding the demo's payouts.py")
    shutil.rmtree(root, ignore_errors=True)
    home, warehouse, log = root / "airflow_home", root / "warehouse.duckdb", root / "demo.log"
    home.mkdir(parents=True)
    env = _env(home, warehouse, dags)

    print(f"Airflow home {home}, warehouse {warehouse} (DuckDB), log {log}")
    seconds = _run([_airflow(), "db", "migrate"], env, log)
    print(f"airflow db migrate: {seconds:.1f} s")
    engine = sa.create_engine(f"duckdb:///{warehouse}", poolclass=NullPool)
    sales = create_sales(engine)
    create_payouts(engine, "payouts")
    create_payouts(engine, "payouts_naive", keyed=False)
    print(
        f"loaded {sales:,} sales (2,000 a day from 2026-08-01); window {DAY}; "
        "truth: 2,000 rows / 299,730.00\n"
    )

    engine.dispose()
    runs = [sys.executable, "-c", RUNS, str(warehouse)]
    with log.open("a") as out:
        out.write(f"\n$ the six runs, one process (DAG.test()): {' '.join(runs)}\n")
        out.flush()
        with subprocess.Popen(runs, env=env, stdout=subprocess.PIPE, stderr=out, text=True) as child:
            assert child.stdout is not None
            for line in child.stdout:  # the table, row by row as each run ends
                print(line, end="", flush=True)
    if child.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        sys.exit(
            f"{tail}\n\nthe demo's runs failed with exit code {child.returncode}: the end of {log} is above"
        )
    print("\nIdempotent DAGs end at 2,000 / 299,730.00 whatever the crash left; the naive append grows.")
    print(f"\nRun history of {DAY} (airflow-idempotent history --window {DAY}):\n")
    history = subprocess.run(
        [str(Path(sys.executable).with_name("airflow-idempotent")), "history", "--window", DAY.isoformat()],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    print(history.stdout if history.returncode == 0 else history.stderr)
    return 0


def _print_row(row: tuple[str, str, int, Decimal, float], out: TextIO) -> None:
    dag_id, step, count, total, seconds = row
    took = f"{seconds:5.1f} s" if seconds else ""
    print(f"{dag_id:<22} {step:<24} {count:>6,} rows {total:>14,.2f} EUR  {took}", file=out)


if __name__ == "__main__":
    raise SystemExit(main())

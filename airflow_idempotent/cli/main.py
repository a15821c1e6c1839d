"""The ``airflow-idempotent`` command line: one subparser and one small handler per command.

    airflow-idempotent history ...    DAG runs and task attempts, every write of each window
    airflow-idempotent spool list|requeue|drop ...    history records the store refused
    airflow-idempotent rerun --dag D --window DATE --dry-run ...    what a rerun would change
    airflow-idempotent stop|resume|switches ...    the kill switch
    airflow-idempotent effects list|resolve ...    the effect ledger
    airflow-idempotent lint PATH ...    the DAG linter
    airflow-idempotent demo [--dir D]    the payout that ran twice, on DuckDB, no server

Each command's module says its exit codes; every usage error exits 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from airflow_idempotent import __version__
from airflow_idempotent import demo as demo_module
from airflow_idempotent.cli import effects, history, rerun, spool, switches
from airflow_idempotent.cli.common import PROG, CliError, report_error
from airflow_idempotent.lint import cli as lint_cli


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command (each sets its `handler`)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect and steer idempotent window writes recorded by airflow-idempotent.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    history.add_history_parser(commands)
    switches.add_switch_parsers(commands)
    lint_cli.register(commands)
    effects.register(commands)
    spool.register(commands)
    rerun.register(commands)
    demo = commands.add_parser(
        "demo",
        help="run the demo: the payout that ran twice, rerun through Airflow on DuckDB (no server)",
        description="Run the payouts demo from the installed package: a throwaway Airflow home and "
        "DuckDB warehouse, a crash, then reruns of each payouts DAG with `airflow dags test`. Needs the "
        "duckdb extra: pip install 'airflow-idempotent[duckdb]'.",
    )
    demo_module.add_arguments(demo)
    demo.set_defaults(handler=demo_module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (argparse's usage errors return 2)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: keep argparse's code
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return handler(args)
    except CliError as err:
        return report_error(args.command, err)
    except KeyboardInterrupt:
        return 130

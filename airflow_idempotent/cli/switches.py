"""``stop``, ``resume`` and ``switches``: the kill switch every guarded write checks.

    airflow-idempotent stop --dag DAG [--backfill] --reason TEXT | --all --reason TEXT
    airflow-idempotent resume --dag DAG [--backfill] | --all
    airflow-idempotent switches [--json]

Exit codes: 0 done, 1 the history store cannot be used, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import sqlalchemy as sa

from airflow_idempotent.cli.common import (
    EXIT_USAGE,
    CliError,
    add_conn_arg,
    logs_to_stderr,
    open_store,
    visible_text,
)
from airflow_idempotent.guard import killswitch
from airflow_idempotent.history.models import KillSwitch
from airflow_idempotent.history.report import jsonable


def add_switch_parsers(commands: Any) -> None:
    """`stop`, `resume` and `switches`: the kill switch every guarded write checks."""
    for name, text in (
        (
            "stop",
            "turn a kill switch on: every covered guarded write refuses, before writing and before commit",
        ),
        ("resume", "turn a kill switch off"),
    ):
        p = commands.add_parser(name, help=text, description=text)
        target = p.add_mutually_exclusive_group(required=True)
        target.add_argument("--dag", help="the DAG whose writes stop (with --backfill: only its backfill)")
        target.add_argument("--all", action="store_true", help="every DAG (the global switch)")
        p.add_argument("--backfill", action="store_true", help="only the DAG's backfill runs")
        if name == "stop":
            p.add_argument(
                "--reason", required=True, type=visible_text, help="why: shown to everyone the switch stops"
            )
        add_conn_arg(p)
        p.set_defaults(handler=cmd_stop if name == "stop" else cmd_resume)
    p = commands.add_parser("switches", help="list the kill switches that are on")
    p.add_argument("--json", action="store_true", help="print one JSON document (a list of switches)")
    add_conn_arg(p)
    p.set_defaults(handler=cmd_switches)


def _scope(args: argparse.Namespace) -> tuple[Any, str | None]:
    if args.all:
        if args.backfill:
            raise CliError("--backfill goes with --dag, not --all", code=EXIT_USAGE)
        return "global", None
    return ("backfill" if args.backfill else "dag"), args.dag


def cmd_stop(args: argparse.Namespace) -> int:
    scope, key = _scope(args)
    if not args.reason.strip():
        raise CliError(
            "--reason must say why, e.g. --reason 'breach on 2026-08-19, investigating'", code=EXIT_USAGE
        )
    with logs_to_stderr():
        switch = killswitch.set_switch(open_store(args.conn_id), scope, key, args.reason.strip())
    print(f"ON: {switch.describe()}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    scope, key = _scope(args)
    with logs_to_stderr():
        was_on = killswitch.clear_switch(open_store(args.conn_id), scope, key)
    where = "all DAGs" if scope == "global" else f"{scope} {key}"
    print(f"OFF: kill switch on {where}" if was_on else f"kill switch on {where} was not on: nothing to do")
    return 0


def cmd_switches(args: argparse.Namespace) -> int:
    with logs_to_stderr():
        switches = killswitch.active_switches(open_store(args.conn_id), None, backfill=True)
        switches += [s for s in _all_dag_switches(args.conn_id) if s not in switches]
    if args.json:
        print(json.dumps([jsonable(s.__dict__) for s in switches], indent=2))
    elif not switches:
        print("no kill switch is on")
    else:
        for s in switches:
            print(f"ON: {s.describe()}")
    return 0


def _all_dag_switches(conn_id: str) -> list[Any]:
    """Every DAG-scoped switch that is on (`active_switches` answers for one DAG at a time)."""
    store = open_store(conn_id)
    table = KillSwitch.__table__
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(table).where(table.c.active.is_(True), table.c.scope == "dag")).all()
    return [killswitch.Switch(r.scope, r.scope_key, r.reason, r.set_by, r.set_at) for r in rows]

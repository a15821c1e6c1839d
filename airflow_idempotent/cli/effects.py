"""``airflow-idempotent effects``: list the effect ledger per window, and decide pending effects.

    airflow-idempotent effects list [--dag DAG] [--task TASK] [--effect NAME] [--state STATE]
                                    [--window DATE | --from DATE --to DATE] [--limit N] [--json]
                                    [--conn-id CONN_ID]
    airflow-idempotent effects resolve (--key KEY | --identity KEY)
                                       --as {done,failed,resend,compensated}
                                       [--reference REF] [--reason TEXT] [--json] [--conn-id CONN_ID]

``resolve`` is the explicit decision a pending effect waits for when its attempt died between
the claim and the ledger's commit and the target cannot be asked by idempotency key:

- ``done``: it went out (give the target's id with ``--reference``); reruns skip it;
- ``failed``: it did not go out; the next attempt sends it;
- ``resend``: unknown, send it again with the same idempotency key on the next attempt;
- ``compensated``: a done effect was undone at the target (refund, recall); reruns skip it.

Exit codes: 0 done, 1 the history store cannot be used, 2 bad usage, 3 refused (no such key,
the decision does not apply to the effect's state, or a live attempt holds the effect).
"""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from airflow_idempotent.cli.common import (
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    add_conn_arg,
    add_day_args,
    cell,
    day_bounds,
    error_text,
    logs_to_stderr,
    make_console,
    positive_int,
    print_plain,
    report_error,
    visible_text,
    when,
)
from airflow_idempotent.effects.entry import STATES
from airflow_idempotent.effects.errors import EffectBusyError, EffectError
from airflow_idempotent.effects.ledger import Ledger
from airflow_idempotent.history.report import jsonable
from airflow_idempotent.history.store import EMBEDDED_FILE

RESOLUTIONS = ("done", "failed", "resend", "compensated")
DEFAULT_LIMIT = 200


# ------------------------------------------------------------------------------- arguments
def register(subparsers: Any) -> None:
    """Add ``effects`` (with ``list`` and ``resolve``) to the main CLI's subparsers."""
    p = subparsers.add_parser(
        "effects",
        help="the effect ledger: external effects per window, and decisions on pending ones",
        description=(
            "Emails, HTTP calls and file deliveries performed at most once per (DAG, task, window, "
            "effect, business key): list them per window, or decide an effect left pending by a "
            "crashed attempt."
        ),
        epilog=(
            "Reads the connection --conn-id, or, when it is not defined, the embedded SQLite file "
            f"$AIRFLOW_HOME/{EMBEDDED_FILE}."
        ),
    )
    actions = p.add_subparsers(dest="effects_action", metavar="ACTION")

    ls = actions.add_parser("list", help="effects per window, newest window first")
    ls.add_argument("--dag", metavar="DAG", help="only effects of this DAG")
    ls.add_argument("--task", metavar="TASK", help="only effects of this task")
    ls.add_argument("--effect", metavar="NAME", help="only effects of this name")
    ls.add_argument("--state", choices=STATES, help="only effects in this state")
    add_day_args(ls)
    ls.add_argument(
        "--limit", metavar="N", type=positive_int, default=DEFAULT_LIMIT, help="at most N effects"
    )
    ls.add_argument("--json", action="store_true", help="print one JSON document (a list of windows)")
    add_conn_arg(ls)

    rs = actions.add_parser(
        "resolve",
        help="decide an effect left pending (or mark a done one compensated)",
        description=(
            "Record a human decision on one effect. done: it went out (--reference: the target's id); "
            "failed: it did not go out, the next attempt sends it; resend: unknown, the next attempt "
            "sends it again with the same idempotency key; compensated: a done effect was undone."
        ),
    )
    which = rs.add_mutually_exclusive_group(required=True)
    which.add_argument("--key", metavar="KEY", help="the idempotency key (as the failed task printed it)")
    which.add_argument("--identity", metavar="KEY", help="the identity key (idem-<sha256>)")
    rs.add_argument("--as", dest="as_", choices=RESOLUTIONS, required=True, help="the decision")
    rs.add_argument("--reference", metavar="REF", help="the target's id of the effect (with --as done)")
    rs.add_argument("--reason", metavar="TEXT", type=visible_text, help="why, recorded with the decision")
    rs.add_argument("--json", action="store_true", help="print the resolved effect as JSON")
    add_conn_arg(rs)
    p.set_defaults(handler=run)


# ------------------------------------------------------------------------------- entry point
def run(args: argparse.Namespace) -> int:
    """Run ``effects list`` or ``effects resolve``; returns the exit code."""
    action = getattr(args, "effects_action", None)
    if action not in ("list", "resolve"):
        print("airflow-idempotent effects: choose an action: list or resolve (see --help)", file=sys.stderr)
        return EXIT_USAGE
    try:
        return cmd_list(args) if action == "list" else cmd_resolve(args)
    except CliError as err:
        return report_error(f"effects {action}", err)


def _open(conn_id: str) -> Ledger:
    try:
        ledger = Ledger.from_airflow(conn_id)
        ledger.migrate()
    except Exception as err:
        raise CliError(f"cannot use the history store of connection {conn_id!r}: {error_text(err)}") from None
    return ledger


def cmd_list(args: argparse.Namespace) -> int:
    start, end = day_bounds(args)
    with logs_to_stderr():
        ledger = _open(args.conn_id)
        try:
            entries = ledger.entries(
                dag_id=args.dag,
                task_id=args.task,
                effect_name=args.effect,
                state=args.state,
                start=start,
                end=end,
                limit=args.limit,
            )
        finally:
            ledger.engine.dispose()
    windows = group_by_window([e.as_dict() for e in entries])
    if args.json:
        json.dump(jsonable(windows), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    console = make_console()
    if not windows:
        console.print("No effects match.")
        return 0
    render_windows(console, windows)
    more = f"; showing {args.limit}, raise --limit for more" if len(entries) >= args.limit else ""
    console.print(f"{len(windows)} window(s), {len(entries)} effect(s){more}")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    if args.reference is not None and args.as_ not in ("done", "compensated"):
        raise CliError("--reference goes with --as done (or compensated)", EXIT_USAGE)
    key = args.key or args.identity
    actor = f"{getpass.getuser()}@{socket.gethostname()}"
    with logs_to_stderr():
        ledger = _open(args.conn_id)
        try:
            entry = ledger.find(key)
            if entry is None or (args.identity and entry.identity_key != args.identity):
                raise CliError(
                    f"no effect has the key {key!r}: list them with `airflow-idempotent effects list`",
                    EXIT_REFUSED,
                )
            try:
                with ledger.owner_lock(entry.identity_key, 0):
                    current = ledger.get(entry.identity_key)
                    assert current is not None
                    resolved = ledger.resolve(
                        current, args.as_, actor=actor, reference=args.reference, reason=args.reason
                    )
            except EffectBusyError:
                raise CliError(
                    f"{entry.idempotency_key} is held by a live attempt ({entry.owner()}): it is being "
                    "performed right now; wait for it to finish, then look again",
                    EXIT_REFUSED,
                ) from None
            except EffectError as err:
                raise CliError(str(err), EXIT_REFUSED) from None
        finally:
            ledger.engine.dispose()
    if args.json:
        json.dump(jsonable(resolved.as_dict()), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(
            f"{resolved.idempotency_key}: {resolved.effect_name} of {resolved.dag_id}.{resolved.task_id} "
            f"for window {resolved.window_label} is now {resolved.state}"
            + (" (the next attempt sends it again)" if resolved.resend_requested else "")
            + f"; {resolved.resolution}"
        )
        if args.as_ == "done" and not resolved.reference:
            print("note: no --reference recorded; reruns skip it without the target's id", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------- rendering
def group_by_window(effects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Effects (EffectEntry.as_dict()) grouped by window, in the order given."""
    windows: dict[tuple[datetime, datetime], dict[str, Any]] = {}
    for e in effects:
        key = (e["window_start"], e["window_end"])
        window = windows.setdefault(
            key,
            {
                "window": {"label": e["window_label"], "start": e["window_start"], "end": e["window_end"]},
                "effects": [],
            },
        )
        window["effects"].append(e)
    return list(windows.values())


EFFECT_COLUMNS = (
    ("dag", "left"),
    ("task", "left"),
    ("effect", "left"),
    ("business key", "left"),
    ("state", "left"),
    ("gen", "right"),
    ("attempts", "right"),
    ("run", "left"),
    ("try", "right"),
    ("idempotency key", "left"),
    ("reference", "left"),
    ("finished (UTC)", "left"),
)
STATE_STYLES = {
    "done": "green",
    "pending": "bold red",
    "failed": "red",
    "compensated": "yellow",
    "suppressed": "yellow",
}


def effects_table(console: Any, effects: Sequence[dict[str, Any]]) -> Any:
    """A rich Table of effects (EffectEntry.as_dict() rows): for this CLI and the history display."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    plain = not console.is_terminal
    table = Table(
        box=box.ASCII if plain else box.SIMPLE_HEAVY,
        show_edge=not plain,
        pad_edge=False,
        header_style="" if plain else "bold",
    )
    whole = {"run": "run_id", "idempotency key": "idempotency_key", "reference": "reference"}
    for name, justify in EFFECT_COLUMNS:
        if name in whole:  # copied into `effects resolve`: never shortened
            width = max([len(name), *(len(str(e.get(whole[name]) or "")) for e in effects)])
            table.add_column(name, justify=justify, no_wrap=True, min_width=min(width, 200))  # type: ignore[arg-type]
        else:
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for e in effects:
        state = e["state"]
        cells = [
            e["dag_id"],
            e["task_id"],
            e["effect_name"],
            e.get("business_key"),
            None,
            e["generation"],
            e["attempt"],
            e["run_id"],
            e["try_number"],
            e["idempotency_key"],
            e.get("reference"),
            when(e.get("finished_at")),
        ]
        row = [Text(cell(c)) for c in cells]
        row[4] = Text(state, style=STATE_STYLES.get(state, ""))
        table.add_row(*row)
    return table


def print_effects(console: Any, effects: Sequence[dict[str, Any]], title: str | None = None) -> None:
    """A window's effects: an optional dim title, the table, then one dim line per note.

    For ``history`` too: ``print_effects(console, window["effects"], "  effects")``.
    """
    from rich.text import Text

    if title:
        console.print(Text(title, style="dim"))
    console.print(effects_table(console, effects))
    for line in effect_notes(effects):
        console.print(Text(line, style="dim"))


def effect_notes(effects: Sequence[dict[str, Any]]) -> list[str]:
    """One line per note of an effect: its last error, resolution, declared-rerun decision."""
    lines = []
    for e in effects:
        label = e["effect_name"] + (f" [{e['business_key']}]" if e.get("business_key") else "")
        if e.get("resend_requested"):
            lines.append(f"  {label}: resend requested, the next attempt sends it")
        for name in ("error", "resolution", "decision"):
            if e.get(name):
                lines.append(f"  {label} {name}: {str(e[name]).splitlines()[0]}")
    return lines


def render_windows(console: Any, windows: Sequence[dict[str, Any]]) -> None:
    """Per window: a header line and its effects (plain text without trailing blanks off a terminal)."""
    print_plain(console, lambda: _render(console, windows))


def _render(console: Any, windows: Sequence[dict[str, Any]]) -> None:
    from rich.text import Text

    for window in windows:
        w = window["window"]
        header = Text()
        header.append(f"window {w['label']}", style="bold")
        header.append(
            f"  [{w['start'].isoformat()}, {w['end'].isoformat()})  {len(window['effects'])} effect(s)"
        )
        pending = sum(1 for e in window["effects"] if e["state"] == "pending")
        if pending:
            header.append(f"  {pending} pending: decide with `effects resolve`", style="bold red")
        console.print(header)
        print_effects(console, window["effects"])
        console.print()

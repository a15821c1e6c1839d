"""The ``airflow-idempotent`` command line: one subparser and one small handler per command.

    airflow-idempotent history [--dag DAG] [--task TASK] [--table TABLE]
                               [--window DATE | --from DATE --to DATE]
                               [--flag {nondeterministic,skipped,failed}] [--limit N] [--json]
                               [--conn-id CONN_ID]

Exit codes: 0 done (also when nothing matches), 1 the history store cannot be used, 2 bad usage
(unknown option, bad date, empty period).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from typing import Any

from airflow_idempotent import __version__
from airflow_idempotent.history.report import (
    DEFAULT_LIMIT,
    FLAG_CHOICES,
    FLAG_FAILED,
    FLAG_NONDETERMINISTIC,
    FLAG_REFUSED,
    FLAG_SKIPPED,
    SHORT,
    HistoryFilter,
    day_range,
    first_line,
    jsonable,
    short,
)
from airflow_idempotent.history.store import DEFAULT_CONN_ID, EMBEDDED_FILE

PROG = "airflow-idempotent"
#: Seconds the CLI waits to connect to the store (and for one statement on PostgreSQL).
STORE_TIMEOUT = 10.0
#: Console width when stdout is not a terminal: wide enough that no table wraps.
PLAIN_WIDTH = 400
DATE_FORMAT = "YYYY-MM-DD"
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


class CliError(Exception):
    """A failure the user can fix: printed as one message (with the fix), then exit `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------------- arguments
def parse_day(text: str) -> date:
    """A UTC day, ``YYYY-MM-DD``; anything else is a usage error (exit 2)."""
    try:
        if not _DATE_RE.fullmatch(text):
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid date {text!r}: expected {DATE_FORMAT} (a UTC day), e.g. 2026-08-25"
        ) from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}: expected a whole number >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect and steer idempotent window writes recorded by airflow-idempotent.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_history_parser(commands)
    add_switch_parsers(commands)
    from airflow_idempotent.lint import cli as lint_cli

    lint_cli.register(commands)
    from airflow_idempotent.effects import cli as effects_cli

    effects_cli.register(commands)
    return parser


def add_history_parser(commands: Any) -> None:
    p = commands.add_parser(
        "history",
        help="every write of each (table, window), in order, with its task attempts",
        description=(
            "Show, per target table and window, every write in order (ordinal, run, try, strategy, "
            "status, row counts, checksum, fingerprint, dataset version, flags) and the task "
            "attempts beneath it. The filters choose windows; each chosen window is shown whole."
        ),
        epilog=(
            "Dates are UTC days; a window matches when it overlaps the days asked for "
            "(--from and --to both included). Reads the connection --conn-id, or, when it is not "
            f"defined, the embedded SQLite file $AIRFLOW_HOME/{EMBEDDED_FILE}."
        ),
    )
    p.add_argument("--dag", metavar="DAG", help="only windows this DAG wrote")
    p.add_argument("--task", metavar="TASK", help="only windows this task wrote")
    p.add_argument(
        "--table",
        metavar="TABLE",
        help='only this table: the table part of a target ("conn_id:table") or the whole target',
    )
    p.add_argument("--window", metavar="DATE", type=parse_day, help="only windows overlapping this day")
    p.add_argument(
        "--from",
        dest="date_from",
        metavar="DATE",
        type=parse_day,
        help="only windows overlapping this day or later",
    )
    p.add_argument(
        "--to",
        dest="date_to",
        metavar="DATE",
        type=parse_day,
        help="only windows overlapping this day or earlier",
    )
    p.add_argument(
        "--flag",
        choices=FLAG_CHOICES,
        help="only windows with a non-deterministic write, a skipped write, or a refused write or "
        "failed attempt",
    )
    p.add_argument(
        "--limit",
        metavar="N",
        type=positive_int,
        default=DEFAULT_LIMIT,
        help=f"at most N windows, those with the latest window start (default {DEFAULT_LIMIT})",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document (a list of windows)")
    p.add_argument(
        "--conn-id",
        default=DEFAULT_CONN_ID,
        help=f"Airflow connection of the history store (default {DEFAULT_CONN_ID})",
    )
    p.set_defaults(handler=cmd_history)


# ------------------------------------------------------------------------------- kill switch
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
            p.add_argument("--reason", required=True, help="why: shown to everyone the switch stops")
        p.add_argument("--conn-id", default=DEFAULT_CONN_ID, help="history connection (default %(default)s)")
        p.set_defaults(handler=cmd_stop if name == "stop" else cmd_resume)
    p = commands.add_parser("switches", help="list the kill switches that are on")
    p.add_argument("--json", action="store_true")
    p.add_argument("--conn-id", default=DEFAULT_CONN_ID)
    p.set_defaults(handler=cmd_switches)


def _scope(args: argparse.Namespace) -> tuple[Any, str | None]:
    if args.all:
        if args.backfill:
            raise CliError("--backfill goes with --dag, not --all", code=2)
        return "global", None
    return ("backfill" if args.backfill else "dag"), args.dag


def cmd_stop(args: argparse.Namespace) -> int:
    from airflow_idempotent.guard import killswitch

    scope, key = _scope(args)
    if not args.reason.strip():
        raise CliError("--reason must say why, e.g. --reason 'breach on 2026-08-19, investigating'", code=2)
    with logs_to_stderr():
        switch = killswitch.set_switch(open_store(args.conn_id), scope, key, args.reason.strip())
    print(f"ON: {switch.describe()}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from airflow_idempotent.guard import killswitch

    scope, key = _scope(args)
    with logs_to_stderr():
        was_on = killswitch.clear_switch(open_store(args.conn_id), scope, key)
    where = "all DAGs" if scope == "global" else f"{scope} {key}"
    print(f"OFF: kill switch on {where}" if was_on else f"kill switch on {where} was not on: nothing to do")
    return 0


def cmd_switches(args: argparse.Namespace) -> int:
    from airflow_idempotent.guard import killswitch

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
    import sqlalchemy as sa

    from airflow_idempotent.guard import killswitch

    store = open_store(conn_id)
    table = killswitch.KillSwitch.__table__
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(table).where(table.c.active.is_(True), table.c.scope == "dag")).all()
    return [killswitch.Switch(r.scope, r.scope_key, r.reason, r.set_by, r.set_at) for r in rows]


# ------------------------------------------------------------------------------- the store
def _define_hint(conn_id: str) -> str:
    env = f"AIRFLOW_CONN_{conn_id.upper()}"
    return (
        f"Define the connection {conn_id!r} so that it reaches the store, e.g.\n"
        f'  export {env}=\'{{"conn_type": "postgres", "host": "db-host", "port": 5432, '
        f'"login": "airflow", "password": "...", "schema": "idempotent_history"}}\'\n'
        f"  or: airflow connections add {conn_id} "
        "--conn-uri 'postgresql://airflow:...@db-host:5432/idempotent_history'\n"
        f"Without that connection the embedded SQLite file $AIRFLOW_HOME/{EMBEDDED_FILE} is read."
    )


def _error_text(err: BaseException) -> str:
    orig = getattr(err, "orig", None)
    text = str(orig if orig is not None else err).strip()
    return f"{type(orig or err).__name__}: {first_line(text) or '(no message)'}"


def open_store(conn_id: str) -> Any:
    """The history store of `conn_id` (or the embedded file), as a `HistoryStore`."""
    from airflow_idempotent.history.store import HistoryStore

    try:
        return HistoryStore.from_airflow(conn_id, timeout=STORE_TIMEOUT)
    except Exception as err:  # a malformed or unsupported connection: say which and how to fix it
        raise CliError(
            f"cannot open the history store of connection {conn_id!r}: {_error_text(err)}\n"
            + _define_hint(conn_id)
        ) from None


@contextlib.contextmanager
def logs_to_stderr() -> Iterator[None]:
    """Keep stdout for the answer: Airflow logs to stdout, and the store's migration logs at INFO.

    Importing airflow configures its logging (a root handler on stdout); while the store is
    opened and read, that handler and anything printed go to stderr instead, and Alembic only
    speaks up for warnings.
    """
    import airflow  # noqa: F401  (configures logging on import: do it before redirecting)

    moved = [
        handler
        for handler in logging.getLogger().handlers
        if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.__stdout__)
    ]
    streams = [(handler, handler.setStream(sys.stderr)) for handler in moved]
    alembic = logging.getLogger("alembic")
    level = alembic.level
    alembic.setLevel(max(level, logging.WARNING))
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        alembic.setLevel(level)
        for handler, stream in streams:
            if stream is not None:
                handler.setStream(stream)


def describe_store(conn_id: str, store: Any) -> str:
    from airflow_idempotent.history.store import airflow_home

    url = store.engine.url
    embedded = str(airflow_home() / EMBEDDED_FILE)
    if url.get_backend_name() == "sqlite" and url.database == embedded:
        return f"the embedded SQLite file {embedded} (connection {conn_id!r} is not defined)"
    return f"connection {conn_id!r} ({url.render_as_string(hide_password=True)})"


# ------------------------------------------------------------------------------- history
def history_filter(args: argparse.Namespace) -> HistoryFilter:
    if args.window is not None and (args.date_from is not None or args.date_to is not None):
        raise CliError("use --window DATE or --from DATE --to DATE, not both", code=2)
    first, last = (args.window, args.window) if args.window is not None else (args.date_from, args.date_to)
    if first is not None and last is not None and first > last:
        raise CliError(f"--from {first} is after --to {last}: expected {DATE_FORMAT} with from <= to", code=2)
    start, end = day_range(first, last)
    return HistoryFilter(
        dag_id=args.dag,
        task_id=args.task,
        table=args.table,
        start=start,
        end=end,
        flag=args.flag,
        limit=args.limit,
    )


def _described_filters(args: argparse.Namespace) -> str:
    parts = [
        f"--{name} {value}"
        for name, value in (
            ("dag", args.dag),
            ("task", args.task),
            ("table", args.table),
            ("window", args.window),
            ("from", args.date_from),
            ("to", args.date_to),
            ("flag", args.flag),
        )
        if value is not None
    ]
    return " ".join(parts) if parts else "(no filter)"


def cmd_history(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from airflow_idempotent.history.report import window_history

    flt = history_filter(args)
    with logs_to_stderr():
        store = open_store(args.conn_id)
        where = describe_store(args.conn_id, store)
        try:
            windows = window_history(store, flt)
        except sa.exc.SQLAlchemyError as err:
            raise CliError(
                f"the history store is unreachable: {where}: {_error_text(err)}\n"
                + _define_hint(args.conn_id)
            ) from None
        finally:
            store.engine.dispose()

    if args.json:
        json.dump(jsonable(windows), sys.stdout, indent=2)
        sys.stdout.write("\n")
        if not windows:
            print(f"no window writes match {_described_filters(args)} in {where}", file=sys.stderr)
        return 0
    console = make_console()
    if not windows:
        console.print(f"No window writes match {_described_filters(args)} in {where}.", markup=False)
        return 0
    render_history(console, windows)
    writes = sum(len(w["writes"]) for w in windows)
    more = (
        f"; showing the latest {flt.limit} windows, raise --limit for more"
        if len(windows) >= flt.limit
        else ""
    )
    console.print(f"{len(windows)} window(s), {writes} write(s) in {where}{more}", markup=False)
    return 0


# ------------------------------------------------------------------------------- rendering
def make_console() -> Any:
    """Rich on a terminal; plain text (no colour, ASCII, one line per row) otherwise."""
    from rich.console import Console

    console = Console(highlight=False)
    if console.is_terminal:
        return console
    return Console(highlight=False, color_system=None, width=PLAIN_WIDTH, emoji=False)


FLAG_STYLES = {
    FLAG_NONDETERMINISTIC: "bold red",
    FLAG_SKIPPED: "yellow",
    FLAG_REFUSED: "bold red",
    FLAG_FAILED: "red",
}
STATUS_STYLES = {"written": "green", "skipped": "yellow", "refused": "bold red"}


def _when(value: datetime | None, sep: str = " ") -> str:
    return value.strftime(f"%Y-%m-%d{sep}%H:%M:%S") if value else "-"


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def _task(row: dict[str, Any]) -> str:
    return row["task_id"] if row["map_index"] in (None, -1) else f"{row['task_id']}[{row['map_index']}]"


def _text(*parts: Any, sep: str = "\n") -> Any:
    """Cells as rich Text, never markup: ids and errors may hold brackets."""
    from rich.text import Text

    text = Text()
    for i, part in enumerate(parts):
        if i:
            text.append(sep)
        if isinstance(part, tuple):
            text.append(_cell(part[0]), style=part[1])
        else:
            text.append(_cell(part))
    return text


def _flags_text(flags: Sequence[str], sep: str = ", ") -> Any:
    from rich.text import Text

    if not flags:
        return Text("-")
    return _text(*((flag, FLAG_STYLES.get(flag, "")) for flag in flags), sep=sep)


def _window_header(window: dict[str, Any]) -> Any:
    from rich.text import Text

    w = window["window"]
    writes = window["writes"]
    versions = [x["dataset_version"] for x in writes if x["dataset_version"] is not None]
    header = Text()
    header.append(window["target"], style="bold cyan")
    header.append(f"  window {w['label']}  [{w['start'].isoformat()}, {w['end'].isoformat()})", style="bold")
    header.append(f"  {len(writes)} write(s)")
    if versions:
        header.append(f", dataset version {versions[-1]}")
    if window["flags"]:
        header.append("  flags: ")
        header.append_text(_flags_text(window["flags"]))
    return header


def _table(console: Any, columns: Sequence[tuple[str, str, int]]) -> Any:
    """Columns are (header, justify, min_width). On a narrow terminal long cells (run ids,
    errors) fold onto more lines; no column gets narrower than its min_width."""
    from rich import box
    from rich.table import Table

    plain = not console.is_terminal
    table = Table(
        box=box.ASCII if plain else box.SIMPLE_HEAD,
        show_edge=not plain,
        pad_edge=False,
        header_style="" if plain else "bold",
    )
    for name, justify, min_width in columns:
        table.add_column(
            name,
            justify=justify,  # type: ignore[arg-type]
            overflow="fold",
            min_width=min_width or None,
        )
    return table


#: Plain text: one line per write, every field its own column (for grep and awk).
PLAIN_WRITE_COLUMNS = (
    ("#", "right", 2),
    ("written (UTC)", "left", 10),
    ("run type", "left", 0),
    ("dag", "left", 0),
    ("run", "left", 0),
    ("task", "left", 0),
    ("try", "right", 0),
    ("strategy", "left", 0),
    ("status", "left", 0),
    ("deleted", "right", 0),
    ("inserted", "right", 0),
    ("updated", "right", 0),
    ("rows", "right", 0),
    ("checksum", "left", SHORT),
    ("fingerprint", "left", SHORT),
    ("version", "right", 0),
    ("semantics", "left", 0),
    ("policy", "left", 0),
    ("flags", "left", 0),
)
#: Terminal: the same fields, paired into two-line cells so a write fits a normal terminal.
RICH_WRITE_COLUMNS = (
    ("#", "right", 2),
    ("written (UTC)", "left", 10),
    ("run / try", "left", 0),
    ("dag / task", "left", 0),
    ("strategy", "left", 0),
    ("-del +ins ~upd", "right", 0),
    ("checksum / fingerprint", "left", SHORT),
    ("version", "right", 0),
    ("semantics / policy", "left", 0),
    ("flags", "left", 0),
)
ATTEMPT_COLUMNS = (
    ("dag", "left", 0),
    ("run", "left", 0),
    ("task", "left", 0),
    ("try", "right", 0),
    ("event", "left", 0),
    ("at (UTC)", "left", 0),
    ("state", "left", 0),
    ("source", "left", 0),
    ("error", "left", 0),
)


def _plain_write_row(w: dict[str, Any]) -> list[Any]:
    values = (
        w["ordinal"],
        _when(w["written_at"]),
        w["run_type"],
        w["dag_id"],
        w["run_id"],
        _task(w),
        w["try_number"],
        w["strategy"],
        w["status"],
        w["rows_deleted"],
        w["rows_inserted"],
        w["rows_updated"],
        w["row_count"],
        short(w["checksum"]),
        short(w["fingerprint"]),
        w["dataset_version"],
        w["semantics"],
        w["policy_version"],
    )
    return [*(_text(v) for v in values), _flags_text(w["flags"])]


def _rich_write_row(w: dict[str, Any]) -> list[Any]:
    counts = " ".join(
        f"{sign}{_cell(w[name])}"
        for sign, name in (("-", "rows_deleted"), ("+", "rows_inserted"), ("~", "rows_updated"))
    )
    return [
        _text((w["ordinal"], "bold")),
        _text(_when(w["written_at"], sep="\n")),
        _text(w["run_id"], (f"{_cell(w['run_type'])}, try {w['try_number']}", "dim")),
        _text(w["dag_id"], _task(w)),
        _text(w["strategy"], (w["status"], STATUS_STYLES.get(w["status"], ""))),
        _text(counts, (f"{_cell(w['row_count'])} rows", "dim")),
        _text(short(w["checksum"]), (short(w["fingerprint"]), "dim")),
        _text(w["dataset_version"]),
        _text(w["semantics"], w["policy_version"]),
        _flags_text(w["flags"], sep="\n"),
    ]


def _writes_table(console: Any, writes: list[dict[str, Any]]) -> Any:
    rich = console.is_terminal
    table = _table(console, RICH_WRITE_COLUMNS if rich else PLAIN_WRITE_COLUMNS)
    for w in writes:
        table.add_row(*(_rich_write_row(w) if rich else _plain_write_row(w)))
    return table


def _attempts_table(console: Any, attempts: list[dict[str, Any]]) -> Any:
    table = _table(console, ATTEMPT_COLUMNS)
    for a in attempts:
        style = "red" if a["failed"] else ""
        values = (
            a["dag_id"],
            a["run_id"],
            _task(a),
            a["try_number"],
            a["event"],
            _when(a["at"]),
            a["state"],
            a["source"],
            first_line(a["error"]),
        )
        table.add_row(*(_text((v, style)) for v in values))
    return table


def render_history(console: Any, windows: list[dict[str, Any]]) -> None:
    """Per window: a header line, its writes, then its task attempts."""
    if console.is_terminal:
        _render_windows(console, windows)
        return
    with console.capture() as captured:  # plain text: no padding at the ends of lines
        _render_windows(console, windows)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def _render_windows(console: Any, windows: list[dict[str, Any]]) -> None:
    for window in windows:
        console.print(_window_header(window))
        console.print(_writes_table(console, window["writes"]))
        if window["attempts"]:
            console.print("  task attempts", style="dim")
            console.print(_attempts_table(console, window["attempts"]))
        else:
            console.print("  task attempts: none recorded", style="dim")
        if window.get("effects"):
            from airflow_idempotent.effects.cli import print_effects

            print_effects(console, window["effects"], "  effects")
        console.print()


# ------------------------------------------------------------------------------- entry point
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
        print(f"{PROG} {args.command}: error: {err}", file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

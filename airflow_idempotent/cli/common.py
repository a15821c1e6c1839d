"""What every ``airflow-idempotent`` command shares: its errors and exit codes, argument types and
options, the history store it opens, where logs go, and the console it prints on."""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

from airflow_idempotent.history.report import day_range, first_line
from airflow_idempotent.history.store import DEFAULT_CONN_ID, EMBEDDED_FILE, HistoryStore, airflow_home
from airflow_idempotent.text import invisible_problem

PROG = "airflow-idempotent"
#: Seconds the CLI waits to connect to the store (and for one statement on PostgreSQL).
STORE_TIMEOUT = 10.0
#: Console width when stdout is not a terminal: wide enough that no table wraps.
PLAIN_WIDTH = 400
DATE_FORMAT = "YYYY-MM-DD"
#: Exit codes: done, the history store cannot be used, bad usage, refused by the command's rules.
EXIT_OK = 0
EXIT_STORE = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


class CliError(Exception):
    """A failure the user can fix: printed as one message (with the fix), then exit `code`."""

    def __init__(self, message: str, code: int = EXIT_STORE) -> None:
        super().__init__(message)
        self.code = code


def report_error(command: str, err: CliError) -> int:
    """Print `err` the way every command does (``airflow-idempotent CMD: error: ...``); its exit code."""
    print(f"{PROG} {command}: error: {err}", file=sys.stderr)
    return err.code


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
    """A whole number >= 1 (a --limit); anything else is a usage error (exit 2)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}: expected a whole number >= 1")
    return value


def visible_text(text: str) -> str:
    """Free text others read (a --reason): no invisible format characters (`airflow_idempotent.text`,
    the rule the API and the plugin apply); one is a usage error (exit 2) naming it and where."""
    problem = invisible_problem(text, "the text")
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_conn_arg(parser: argparse.ArgumentParser) -> None:
    """``--conn-id``: the Airflow connection of the history store."""
    parser.add_argument(
        "--conn-id",
        default=DEFAULT_CONN_ID,
        help=f"Airflow connection of the history store (default {DEFAULT_CONN_ID})",
    )


def add_day_args(parser: argparse.ArgumentParser) -> None:
    """``--window DATE`` or ``--from DATE`` / ``--to DATE``: windows overlapping those UTC days."""
    parser.add_argument("--window", metavar="DATE", type=parse_day, help="only windows overlapping this day")
    parser.add_argument(
        "--from",
        dest="date_from",
        metavar="DATE",
        type=parse_day,
        help="only windows overlapping this day or later",
    )
    parser.add_argument(
        "--to",
        dest="date_to",
        metavar="DATE",
        type=parse_day,
        help="only windows overlapping this day or earlier",
    )


def day_bounds(args: argparse.Namespace) -> tuple[datetime | None, datetime | None]:
    """The days of `add_day_args` as a half-open UTC ``[start, end)``; an end not given stays open."""
    if args.window is not None and (args.date_from is not None or args.date_to is not None):
        raise CliError("use --window DATE or --from DATE --to DATE, not both", code=EXIT_USAGE)
    first, last = (args.window, args.window) if args.window is not None else (args.date_from, args.date_to)
    if first is not None and last is not None and first > last:
        raise CliError(
            f"--from {first} is after --to {last}: expected {DATE_FORMAT} with from <= to", code=EXIT_USAGE
        )
    return day_range(first, last)


# ------------------------------------------------------------------------------- the store
def define_hint(conn_id: str) -> str:
    """How to define the connection `conn_id` so it reaches the store (and what is read without it)."""
    env = f"AIRFLOW_CONN_{conn_id.upper()}"
    return (
        f"Define the connection {conn_id!r} so that it reaches the store, e.g.\n"
        f'  export {env}=\'{{"conn_type": "postgres", "host": "db-host", "port": 5432, '
        f'"login": "airflow", "password": "...", "schema": "idempotent_history"}}\'\n'
        f"  or: airflow connections add {conn_id} "
        "--conn-uri 'postgresql://airflow:...@db-host:5432/idempotent_history'\n"
        f"Without that connection the embedded SQLite file $AIRFLOW_HOME/{EMBEDDED_FILE} is read."
    )


def error_text(err: BaseException) -> str:
    """``ErrorType: first line`` of an error, the driver's own when SQLAlchemy wraps one."""
    orig = getattr(err, "orig", None)
    text = str(orig if orig is not None else err).strip()
    return f"{type(orig or err).__name__}: {first_line(text) or '(no message)'}"


def open_store(conn_id: str) -> HistoryStore:
    """The history store of `conn_id` (or the embedded file); a CliError (exit 1) naming the fix."""
    try:
        return HistoryStore.from_airflow(conn_id, timeout=STORE_TIMEOUT)
    except Exception as err:  # a malformed or unsupported connection: say which and how to fix it
        raise CliError(
            f"cannot open the history store of connection {conn_id!r}: {error_text(err)}\n"
            + define_hint(conn_id)
        ) from None


def describe_store(conn_id: str, store: HistoryStore) -> str:
    """Which store was read, for the last line of an answer (never the password)."""
    url = store.engine.url
    embedded = str(airflow_home() / EMBEDDED_FILE)
    if url.get_backend_name() == "sqlite" and url.database == embedded:
        return f"the embedded SQLite file {embedded} (connection {conn_id!r} is not defined)"
    return f"connection {conn_id!r} ({url.render_as_string(hide_password=True)})"


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


# ------------------------------------------------------------------------------- the console
def make_console() -> Any:
    """Rich on a terminal; plain text (no colour, ASCII, one line per row) otherwise."""
    from rich.console import Console

    console = Console(highlight=False)
    if console.is_terminal:
        return console
    return Console(highlight=False, color_system=None, width=PLAIN_WIDTH, emoji=False)


def print_plain(console: Any, render: Any) -> None:
    """Run `render()` on `console`: as it is on a terminal; otherwise captured, without trailing blanks."""
    if console.is_terminal:
        render()
        return
    with console.capture() as captured:
        render()
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def when(value: datetime | None, sep: str = " ") -> str:
    """A UTC timestamp to the second, ``-`` for none."""
    return value.strftime(f"%Y-%m-%d{sep}%H:%M:%S") if value else "-"


def cell(value: Any) -> str:
    """A table cell's text: ``-`` for nothing."""
    return "-" if value is None or value == "" else str(value)

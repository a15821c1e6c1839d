"""``airflow-idempotent history``: DAG runs and task attempts, and every write of each window.

    airflow-idempotent history [--dag DAG] [--task TASK] [--run RUN] [--table TABLE]
                               [--window DATE | --from DATE --to DATE]
                               [--flag {nondeterministic,skipped,failed}] [--limit N] [--json]
                               [--conn-id CONN_ID]

First the DAG runs (each try of each task: state, duration, host, error; any DAG, window
writes or not), then per (table, window) every write in order with its attempts. Rich tables in
a terminal, plain text otherwise (one line per row), one JSON document with ``--json``
(``{"runs": [...], "windows": [...]}``). Exit codes: 0 done (also when nothing matches), 1 the
history store cannot be used, 2 bad usage (unknown option, bad date, empty period).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from airflow_idempotent.cli.common import (
    CliError,
    add_conn_arg,
    add_day_args,
    cell,
    day_bounds,
    define_hint,
    describe_store,
    error_text,
    logs_to_stderr,
    make_console,
    open_store,
    positive_int,
    print_plain,
    when,
)
from airflow_idempotent.cli.effects import print_effects
from airflow_idempotent.history.approvals import describe as describe_approval
from airflow_idempotent.history.dag_versions import bundle_label, version_label
from airflow_idempotent.history.reconcile import is_reconciled
from airflow_idempotent.history.report import (
    DEFAULT_LIMIT,
    FLAG_CHOICES,
    FLAG_FAILED,
    FLAG_FENCED,
    FLAG_NONDETERMINISTIC,
    FLAG_REFUSED,
    FLAG_SKIPPED,
    SHORT,
    HistoryFilter,
    first_line,
    jsonable,
    short,
    window_history,
)
from airflow_idempotent.history.runs import run_history
from airflow_idempotent.history.store import EMBEDDED_FILE


# ------------------------------------------------------------------------------- arguments
def add_history_parser(commands: Any) -> None:
    """`history`: DAG runs and task attempts, then every write of each (table, window)."""
    p = commands.add_parser(
        "history",
        help="DAG runs and task attempts, and every write of each (table, window)",
        description=(
            "Show the DAG runs (every try of every task: state, duration, host, error), for any "
            "DAG, whether it writes windows or not; then, per target table and window, every write "
            "in order (ordinal, run, try, strategy, status, row counts, checksum, fingerprint, "
            "dataset version, flags) and the task attempts beneath it. --dag, --task, --run and "
            "the days (a run's logical date) and --flag choose runs; all filters choose windows, and each "
            "chosen window is shown whole."
        ),
        epilog=(
            "Dates are UTC days; a window matches when it overlaps the days asked for "
            "(--from and --to both included). Reads the connection --conn-id, or, when it is not "
            f"defined, the embedded SQLite file $AIRFLOW_HOME/{EMBEDDED_FILE}."
        ),
    )
    p.add_argument("--dag", metavar="DAG", help="only windows this DAG wrote")
    p.add_argument("--task", metavar="TASK", help="only this task's attempts, and windows it wrote")
    p.add_argument("--run", metavar="RUN", help="only this DAG run (its run_id), and windows it wrote")
    p.add_argument(
        "--table",
        metavar="TABLE",
        help='only this table: the table part of a target ("conn_id:table") or the whole target',
    )
    add_day_args(p)
    p.add_argument(
        "--flag",
        choices=FLAG_CHOICES,
        help="only the runs and windows with a non-deterministic write, a skipped write, or (failed) "
        "a refused write or failed attempt",
    )
    p.add_argument(
        "--limit",
        metavar="N",
        type=positive_int,
        default=DEFAULT_LIMIT,
        help=f"at most N runs (the latest) and N windows (the latest window start; default {DEFAULT_LIMIT})",
    )
    p.add_argument(
        "--json", action="store_true", help='print one JSON document: {"runs": [...], "windows": [...]}'
    )
    add_conn_arg(p)
    p.set_defaults(handler=cmd_history)


# ------------------------------------------------------------------------------- history
def history_filter(args: argparse.Namespace) -> HistoryFilter:
    """The windows the command line asks for (usage errors exit 2)."""
    start, end = day_bounds(args)
    return HistoryFilter(
        dag_id=args.dag,
        task_id=args.task,
        run_id=args.run,
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
            ("run", args.run),
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
    flt = history_filter(args)
    with logs_to_stderr():
        store = open_store(args.conn_id)
        where = describe_store(args.conn_id, store)
        try:
            runs = run_history(store, flt)
            windows = window_history(store, flt)
        except sa.exc.SQLAlchemyError as err:
            raise CliError(
                f"the history store is unreachable: {where}: {error_text(err)}\n" + define_hint(args.conn_id)
            ) from None
        finally:
            store.engine.dispose()

    if args.json:
        json.dump(jsonable({"runs": runs, "windows": windows}), sys.stdout, indent=2)
        sys.stdout.write("\n")
        if not runs:
            print(f"no DAG runs match {_described_filters(args)} in {where}", file=sys.stderr)
        if not windows:
            print(f"no window writes match {_described_filters(args)} in {where}", file=sys.stderr)
        return 0
    console = make_console()
    if runs:
        render_runs(console, runs)
        tries = sum(len(r["tries"]) for r in runs)
        console.print(f"{len(runs)} DAG run(s), {tries} task attempt(s) in {where}", markup=False)
        console.print()
    else:
        console.print(f"No DAG runs match {_described_filters(args)} in {where}.", markup=False)
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
FLAG_STYLES = {
    FLAG_NONDETERMINISTIC: "bold red",
    FLAG_SKIPPED: "yellow",
    FLAG_REFUSED: "bold red",
    FLAG_FENCED: "magenta",
    FLAG_FAILED: "red",
}
STATUS_STYLES = {"written": "green", "skipped": "yellow", "refused": "bold red", "fenced": "magenta"}


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
            text.append(cell(part[0]), style=part[1])
        else:
            text.append(cell(part))
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
    ("dag version", "left", 0),
    ("bundle", "left", 0),
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
    ("code", "left", 0),
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
        when(w["written_at"]),
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
        version_label(w),
        bundle_label(w),
    )
    return [*(_text(v) for v in values), _flags_text(w["flags"])]


def _rich_write_row(w: dict[str, Any]) -> list[Any]:
    counts = " ".join(
        f"{sign}{cell(w[name])}"
        for sign, name in (("-", "rows_deleted"), ("+", "rows_inserted"), ("~", "rows_updated"))
    )
    return [
        _text((w["ordinal"], "bold")),
        _text(when(w["written_at"], sep="\n")),
        _text(w["run_id"], (f"{cell(w['run_type'])}, try {w['try_number']}", "dim")),
        _text(w["dag_id"], _task(w)),
        _text(w["strategy"], (w["status"], STATUS_STYLES.get(w["status"], ""))),
        _text(counts, (f"{cell(w['row_count'])} rows", "dim")),
        _text(short(w["checksum"]), (short(w["fingerprint"]), "dim")),
        _text(w["dataset_version"]),
        _text(w["semantics"], w["policy_version"]),
        _text(version_label(w), bundle_label(w)),
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
            when(a["at"]),
            a["state"],
            a["source"],
            first_line(a["error"]),
        )
        table.add_row(*(_text((v, style)) for v in values))
    return table


TRY_COLUMNS = (
    ("task", "left", 0),
    ("try", "right", 0),
    ("state", "left", 0),
    ("started (UTC)", "left", 0),
    ("duration", "right", 0),
    ("host", "left", 0),
    ("window write", "left", 0),
    ("error", "left", 0),
)


def duration(seconds: float | None) -> str:
    """A duration as people read it: ``0.42 s``, ``12.3 s``, ``4 min 05 s``; ``-`` while running."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def state_text(entry: dict[str, Any]) -> Any:
    """A state, with where it came from when Airflow's replaced a ``running`` that recorded no end."""
    if is_reconciled(entry):
        return f"{entry['state']} (per Airflow; no end recorded)"
    return entry["state"]


def _run_header(run: dict[str, Any]) -> Any:
    from rich.text import Text

    header = Text()
    header.append(run["dag_id"], style="bold cyan")
    header.append(f"  run {run['run_id']}", style="bold")
    header.append(f"  {cell(run['run_type'])}, state ")
    header.append(cell(state_text(run)), style="red" if run["state"] == "failed" else "")
    header.append(f"  started {when(run['started_at'])}, {duration(run['duration_seconds'])}")
    header.append(f"  {len(run['tries'])} task attempt(s), {len(run['writes'])} window write(s)")
    return header


def _tries_table(console: Any, run: dict[str, Any]) -> Any:
    table = _table(console, TRY_COLUMNS)
    for t in run["tries"]:
        wrote = [
            f"{w['target']} {w['window_label']} {w['status']}"
            for w in run["writes"]
            if (w["task_id"], w["map_index"], w["try_number"])
            == (t["task_id"], t["map_index"], t["try_number"])
        ]
        style = "red" if t["failed"] else ""
        values = (
            _task(t),
            t["try_number"],
            state_text(t),
            when(t["started_at"]),
            duration(t["duration_seconds"]),
            t["hostname"],
            "; ".join(wrote) or None,
            first_line(t["error"]),
        )
        table.add_row(*(_text((v, style)) for v in values))
    return table


def render_runs(console: Any, runs: list[dict[str, Any]]) -> None:
    """Per DAG run: a header line, then one row per try of each task."""

    def render() -> None:
        for run in runs:
            console.print(_run_header(run))
            if run["tries"]:
                console.print(_tries_table(console, run))
            else:
                console.print("  task attempts: none recorded", style="dim")
            console.print()

    print_plain(console, render)


def render_history(console: Any, windows: list[dict[str, Any]]) -> None:
    """Per window: a header line, its writes, then its task attempts (and effects)."""
    print_plain(console, lambda: _render_windows(console, windows))


def _render_windows(console: Any, windows: list[dict[str, Any]]) -> None:
    for window in windows:
        console.print(_window_header(window))
        console.print(_writes_table(console, window["writes"]))
        for approval in window.get("approvals", []):
            console.print(f"  approval: {describe_approval(approval)}", highlight=False)
        if window["attempts"]:
            console.print("  task attempts", style="dim")
            console.print(_attempts_table(console, window["attempts"]))
        else:
            console.print("  task attempts: none recorded", style="dim")
        if window.get("effects"):
            print_effects(console, window["effects"], "  effects")
        console.print()

"""``airflow-idempotent spool``: the history records the store refused, parked in ``rejected/``.

    airflow-idempotent spool list [--json] [--spool-dir DIR]
    airflow-idempotent spool requeue (ID... | --all) [--deliver] [--conn-id ID] [--spool-dir DIR]
    airflow-idempotent spool drop (ID... | --all) [--yes] [--spool-dir DIR]

A record the store answered and refused (a NUL byte PostgreSQL will not take) is parked with the
reason so it never holds back the records after it; here a person sees why, puts it back for
delivery once the cause is fixed, or deletes it. Exit codes: 0 done, 1 the history store cannot be
used (``--deliver``), 2 bad usage (an unknown id), 3 a drop without ``--yes`` not confirmed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from airflow_idempotent.cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    add_conn_arg,
    define_hint,
    describe_store,
    error_text,
    logs_to_stderr,
    open_store,
)
from airflow_idempotent.history.spool import REJECTED_DIR, SPOOL_DIR, RejectedRecord, Spool
from airflow_idempotent.history.store import airflow_home


def register(commands: Any) -> None:
    """`spool list|requeue|drop`."""
    p = commands.add_parser(
        "spool",
        help="history records the store refused (parked in idempotent_spool/rejected/)",
        description=(
            "List, requeue or drop the history records the store refused. Each is parked in "
            f"$AIRFLOW_HOME/{SPOOL_DIR}/{REJECTED_DIR}/ with the store's reason."
        ),
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="every parked record, with the reason it was refused")
    listing.add_argument("--json", action="store_true", help="print one JSON document (a list)")
    _add_dir(listing)
    listing.set_defaults(handler=cmd_list)

    requeue = actions.add_parser(
        "requeue", help="put records back in the spool, delivered by the next successful write"
    )
    _add_ids(requeue)
    requeue.add_argument(
        "--deliver",
        action="store_true",
        help="deliver the spool now (a record refused again is parked again, with the new reason)",
    )
    add_conn_arg(requeue)
    _add_dir(requeue)
    requeue.set_defaults(handler=cmd_requeue)

    drop = actions.add_parser("drop", help="delete parked records for good (asks, or --yes)")
    _add_ids(drop)
    drop.add_argument("--yes", action="store_true", help="drop without asking")
    _add_dir(drop)
    drop.set_defaults(handler=cmd_drop)


def _add_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spool-dir",
        type=Path,
        default=None,
        help=f"the spool folder (default $AIRFLOW_HOME/{SPOOL_DIR})",
    )


def _add_ids(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="*", metavar="ID", help="ids as `spool list` shows them")
    parser.add_argument("--all", action="store_true", help="every parked record")


def _spool(args: argparse.Namespace) -> Spool:
    return Spool(args.spool_dir or airflow_home() / SPOOL_DIR)


def _summary(r: RejectedRecord) -> str:
    f = r.fields
    parts = [f.get("kind", "?")]
    parts += [str(f[k]) for k in ("dag_id", "run_id", "task_id", "target") if k in f]
    if "try_number" in f:
        parts.append(f"try {f['try_number']}")
    if "event" in f:
        parts.append(str(f["event"]))
    return " ".join(parts)


def _print_records(records: list[RejectedRecord], verb: str) -> None:
    for r in records:
        print(f"{verb} {r.id}  {_summary(r)}  ({r.reason})")


def _chosen(args: argparse.Namespace, spool: Spool) -> list[str]:
    """The ids the command names (or every parked one with --all); usage errors exit 2."""
    if args.all and args.ids:
        raise CliError("give ids or --all, not both", code=EXIT_USAGE)
    if not args.all and not args.ids:
        raise CliError("name the records (ids from `spool list`) or give --all", code=EXIT_USAGE)
    ids = [r.id for r in spool.rejected_records()] if args.all else list(args.ids)
    known = {r.id for r in spool.rejected_records()}
    unknown = sorted(set(ids) - known)
    if unknown:
        raise CliError(
            f"no rejected record has the id {', '.join(unknown)} in {spool.directory / REJECTED_DIR}: "
            "see `airflow-idempotent spool list`",
            code=EXIT_USAGE,
        )
    return ids


def cmd_list(args: argparse.Namespace) -> int:
    spool = _spool(args)
    records = spool.rejected_records()
    if args.json:
        json.dump([r.as_dict() for r in records], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    if not records:
        print(f"No rejected records in {spool.directory / REJECTED_DIR}.")
        return EXIT_OK
    for r in records:
        print(f"{r.id}  {_summary(r)}")
        print(f"    refused: {r.reason}")
        print(f"    file:    {r.path}")
    print(
        f"{len(records)} rejected record(s). Fix the cause, then `airflow-idempotent spool requeue ID`; "
        "or `airflow-idempotent spool drop ID --yes`."
    )
    return EXIT_OK


def cmd_requeue(args: argparse.Namespace) -> int:
    spool = _spool(args)
    records = spool.requeue(_chosen(args, spool))
    _print_records(records, "requeued")
    if not args.deliver:
        print(f"{len(records)} record(s) back in {spool.directory}: delivered by the next successful write.")
        return EXIT_OK
    with logs_to_stderr():
        store = open_store(args.conn_id)
        where = describe_store(args.conn_id, store)
        before = spool.rejected()
        try:
            delivered = spool.deliver(store)
        except Exception as err:  # unreachable: the records stay spooled for the next write
            raise CliError(
                f"the history store is unreachable: {where}: {error_text(err)}; the records stay in the "
                "spool.\n" + define_hint(args.conn_id)
            ) from None
        finally:
            store.engine.dispose()
    again = spool.rejected() - before
    print(f"delivered {delivered} record(s) to {where}; {again} refused again (see `spool list`)")
    return EXIT_OK


def cmd_drop(args: argparse.Namespace) -> int:
    spool = _spool(args)
    ids = _chosen(args, spool)
    if not args.yes:
        doomed = [r for r in spool.rejected_records() if r.id in set(ids)]
        _print_records(doomed, "would drop")
        if not sys.stdin.isatty():
            print("nothing dropped: confirm with --yes", file=sys.stderr)
            return EXIT_REFUSED
        answer = input(f"Drop {len(doomed)} record(s) for good? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("nothing dropped", file=sys.stderr)
            return EXIT_REFUSED
    _print_records(spool.drop(ids), "dropped")
    return EXIT_OK

"""The ``airflow-idempotent lint`` subcommand: `register` adds it to the CLI's parser, `run` runs it.

Output: text (default), ``--format json``, ``--format sarif`` (SARIF 2.1.0, for GitHub code
scanning). Exit status: 0 no unacknowledged finding, 1 findings, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from airflow_idempotent.lint.linter import lint_paths
from airflow_idempotent.lint.parsing import DIALECTS
from airflow_idempotent.lint.rules import RULES, rule_id, rule_list
from airflow_idempotent.lint.sarif import to_sarif_json

__all__ = ["main", "register", "run"]


def register(subparsers: Any) -> None:
    """Add the `lint` subcommand to an argparse subparsers object (handler: `run`)."""
    p = subparsers.add_parser(
        "lint",
        help="find the shapes that make a rerun unsafe in DAG files and their SQL",
        description=(
            "Read DAG files (never import them) and their SQL, and report what makes a rerun unsafe, "
            "with file:line and the fix. For each task, answer: if this runs twice? what decides its "
            "window? how would we backfill the last 90 days?"
        ),
        epilog=(
            "Rules:\n" + rule_list() + "\n\nAcknowledge a finding with a comment on its line or the line "
            "above: `# idempotent: ack IDEM002 reason` (in SQL: `-- idempotent: ack IDEM002 reason`). "
            "Exit status: 0 no unacknowledged finding, 1 findings, 2 usage error."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="DAG files or folders of DAG files")
    p.add_argument("--json", action="store_true", help="print one JSON document (same as --format json)")
    p.add_argument(
        "--format",
        choices=("text", "json", "sarif"),
        default=None,
        help="output format: text (default), json, or sarif (SARIF 2.1.0 for GitHub code scanning)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="RULE",
        help="leave out a rule (ID or name; repeat or comma-separate)",
    )
    p.add_argument(
        "--dialect",
        choices=DIALECTS,
        default=None,
        help="SQL dialect of the SQL (default: from the operator or connection, else the first that parses)",
    )
    p.add_argument(
        "--catchup-default",
        choices=("on", "off"),
        default=None,
        help=(
            "the deployment's [scheduler] catchup_by_default, for DAGs without catchup= (default: read "
            "from the repository's airflow.cfg or AIRFLOW__SCHEDULER__CATCHUP_BY_DEFAULT, else not judged)"
        ),
    )
    p.add_argument(
        "--follow-imported-callables",
        action="store_true",
        help=(
            "also read a python_callable imported from another module of the repository, in that module "
            "(off by default: on public repositories most of what it adds is harmless)"
        ),
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the `lint` subcommand: 0 clean, 1 findings, 2 usage error."""
    fmt = getattr(args, "format", None)
    if getattr(args, "json", False):
        if fmt == "text":
            print(
                "airflow-idempotent lint: error: --json and --format text contradict each other",
                file=sys.stderr,
            )
            return 2
        fmt = "json"
    ignore: list[str] = []
    for token in getattr(args, "ignore", None) or []:
        for part in str(token).split(","):
            if not part.strip():
                continue
            if rule_id(part) is None:
                known = ", ".join(f"{r.id} ({r.name})" for r in RULES.values())
                print(
                    f"airflow-idempotent lint: error: unknown rule {part.strip()!r}: use one of {known}",
                    file=sys.stderr,
                )
                return 2
            ignore.append(part)
    try:
        chosen = getattr(args, "catchup_default", None)
        report = lint_paths(
            args.paths,
            ignore=ignore,
            dialect=getattr(args, "dialect", None),
            catchup_default=None if chosen is None else chosen == "on",
            follow_callables=bool(getattr(args, "follow_imported_callables", False)),
        )
    except FileNotFoundError as err:
        print(f"airflow-idempotent lint: error: {err}", file=sys.stderr)
        return 2
    if not report.files:
        print(
            "airflow-idempotent lint: error: no DAG files found (a folder's .py files must mention both "
            "'airflow' and 'dag'; name a file to lint it anyway)",
            file=sys.stderr,
        )
        return 2
    if fmt == "sarif":
        sys.stdout.write(to_sarif_json(report) + "\n")
    else:
        sys.stdout.write(report.to_json() + "\n" if fmt == "json" else report.to_text())
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m airflow_idempotent.lint.cli PATH...`: the lint subcommand on its own."""
    parser = argparse.ArgumentParser(prog="airflow-idempotent")
    register(parser.add_subparsers(dest="command"))
    try:
        args = parser.parse_args(["lint", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
